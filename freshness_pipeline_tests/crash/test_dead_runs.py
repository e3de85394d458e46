"""A run SIGKILLed inside `vector_index` under the SHIPPED dagster.yaml (the `embeddings`
pool limited to 1, run monitoring on): it stays STARTED holding its pool slot. The next
`freshness run` must not wait for that slot forever, and the next tier-sensor tick must not
take the source for busy forever."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.cli import main
from freshness_pipeline.defs.liveness import HOST_TAG, reap_dead_runs
from freshness_pipeline.defs.runner import LAUNCH_ENV
from freshness_pipeline.defs.sensors import tier_cadence_sensor
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.indexing import CRASH_ENV
from freshness_pipeline_tests.defs.harness import SOURCE, write_sources
from freshness_pipeline_tests.defs.test_sensors import evaluate
from freshness_pipeline_tests.sitegen import generate

SHIPPED = Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml"


def freshness(
    home: Path, sources: Path, *args: str, crash: str | None = None, launch: str = "launch"
) -> subprocess.CompletedProcess:
    """The CLI in a child process; `launch` is how it runs the refresh (runner.LAUNCH_ENV)."""
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    env |= {"DAGSTER_HOME": str(home), LAUNCH_ENV: launch, **({CRASH_ENV: crash} if crash else {})}
    return subprocess.run(
        [sys.executable, "-m", "freshness_pipeline.cli", "--sources", str(sources), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,  # the bug: the run after the kill waited for the dead run's slot forever
    )


@pytest.fixture(params=["launch", "in-process"])
def killed(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A home with the shipped dagster.yaml and a refresh SIGKILLed at its first upsert: the
    run worker of a code-location launch, or the CLI process running the job in-process."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(SHIPPED, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    site_pages = generate(5, sections_per_page=2, seed=21)
    with DocsSite() as site:
        site.publish(site_pages.markdown())
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
        dead = freshness(home, sources, "run", crash="upsert", launch=request.param)
        with dg.DagsterInstance.get() as instance:
            (record,) = instance.get_run_records()
            if request.param == "in-process":  # the CLI died with the run: STARTED, holding its slot
                assert dead.returncode == -9, dead.stderr[-2000:]
                assert record.dagster_run.status == dg.DagsterRunStatus.STARTED
                assert record.dagster_run.run_id in instance.event_log_storage.get_concurrency_run_ids()
            else:  # the run worker died; the run was failed (by its code server or liveness.py)
                assert dead.returncode == 1 and "failure:" in dead.stdout, dead.stdout
                assert record.dagster_run.status == dg.DagsterRunStatus.FAILURE
            yield home, sources, site, site_pages, instance, record.dagster_run.run_id


def test_the_run_after_a_kill_at_the_upsert_finishes_and_converges(killed) -> None:
    home, sources, site, pages, instance, dead_id = killed
    done = freshness(home, sources, "run", "--json")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "success"
    assert instance.get_run_by_id(dead_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.event_log_storage.get_concurrency_run_ids() == set()

    # What it left, read in this process (DAGSTER_HOME is the home): no third CLI start.
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--sources", str(sources), "dump"]) == 0
        assert main(["--sources", str(sources), "reconcile"]) == 0, out.getvalue()
    dumped = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    assert {(r["url"], r["heading_path"], r["text"]) for r in dumped} == pages.expected(site.base_url)


@pytest.mark.parametrize("killed", ["in-process"], indirect=True)  # launched, the CLI reaps it first
def test_the_next_sensor_tick_after_a_kill_launches_again(killed) -> None:
    home, sources, site, pages, instance, dead_id = killed
    (request,) = evaluate(tier_cadence_sensor, instance).run_requests
    assert request.partition_key == SOURCE
    assert instance.get_run_by_id(dead_id).status == dg.DagsterRunStatus.FAILURE


def test_a_killed_run_launched_without_the_host_tag_is_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The UI's "Materialize all" and backfills run the implicit asset job with none of the
    `refresh` job's tags: killed inside `vector_index`, such a run must not hold its
    `embeddings` slot forever."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(SHIPPED, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DocsSite() as site:
        site.publish(generate(3, sections_per_page=2, seed=22).markdown())
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        with dg.DagsterInstance.get() as instance:
            instance.add_dynamic_partitions("sources", [SOURCE])
        script = (
            "import dagster as dg\n"
            "from freshness_pipeline.defs.definitions import defs\n"
            "job = defs.resolve_implicit_global_asset_job_def()\n"
            f"job.execute_in_process(instance=dg.DagsterInstance.get(), partition_key={SOURCE!r})\n"
        )
        env = {**os.environ, "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(sources), CRASH_ENV: "upsert"}
        dead = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=150)
        assert dead.returncode == -9, dead.stderr[-2000:]
    with dg.DagsterInstance.get() as instance:
        (record,) = instance.get_run_records()
        run = record.dagster_run
        assert run.job_name == "__ASSET_JOB" and HOST_TAG not in run.tags
        assert run.status == dg.DagsterRunStatus.STARTED
        assert run.run_id in instance.event_log_storage.get_concurrency_run_ids()
        assert reap_dead_runs(instance) == [run.run_id]
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_run_ids() == set()
