"""A `freshness run` killed outright (SIGKILL: an OOM kill, a cron timeout) leaves its Dagster
run STARTED, holding its `embeddings` pool slot. On the embedded instance, with no daemon,
the next `freshness run` of the source finds the source's run lock free and the dead run
recorded as executed under it: it fails the run, with the reason, frees its slot and goes
on at once (never waiting: the test's `runs.source_wait_s` would end it with exit 2).
A live `freshness run` of the source is waited for, at most `runs.source_wait_s`."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.config import load_settings
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.indexing import CRASH_ENV
from freshness_pipeline.pipeline.source_runs import holding_source
from freshness_pipeline_tests.processes import as_in_a_terminal
from freshness_pipeline_tests.sitegen import Site, generate, paragraph

REPO = Path(__file__).resolve().parents[2]
SOURCE_WAIT_S = 3.0  # runs.source_wait_s: a run that waited on the dead one would exit 2 after it
TRIALS = 10
IN_FLIGHT = [dg.DagsterRunStatus(s) for s in ("QUEUED", "STARTING", "STARTED", "CANCELING")]


def sources_file(path: Path, sitemap: str, wait_s: float = SOURCE_WAIT_S) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "docs", "sitemap": sitemap}],
                "embedder": {"provider": "hashing", "batch_size": 2},
                "vector_store": {"provider": "lancedb", "upsert_batch": 3},
                "runs": {"source_wait_s": wait_s},
            }
        )
    )
    return path


def env_for(home: Path, sources: Path, crash: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    return (
        env
        | {"PYTHONPATH": str(REPO), "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(sources)}
        | ({CRASH_ENV: crash} if crash else {})
    )


def freshness(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`freshness ARGS` in a session of its own (so a kill reaches whatever it started)."""
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", *args]
    return subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_in_a_terminal,  # the Ctrl-C trials reach it however the suite was started
    )


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def records(env: dict[str, str]) -> list[tuple[str, str, str]]:
    done = subprocess.run(
        [sys.executable, "-m", "freshness_pipeline.cli", "dump"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    return [(r["url"], r["heading_path"], r["text"]) for r in rows]


def converged(env: dict[str, str], site: Site, base_url: str) -> None:
    """Every record once, the index equal to the site, reconcile clean, no run in flight, no
    pool slot held."""
    got = records(env)
    assert len(got) == len(set(got)), "duplicate records"
    assert set(got) == site.expected(base_url)
    done = subprocess.run(
        [sys.executable, "-m", "freshness_pipeline.cli", "reconcile", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0 and not report["orphans"] and not report["missing"], done.stdout + done.stderr
    with dg.DagsterInstance.get() as instance:
        assert not instance.get_run_records(dg.RunsFilter(statuses=IN_FLIGHT))
        assert instance.event_log_storage.get_concurrency_run_ids() == set()  # the test's look at the pool


def failure_reasons(run_id: str) -> list[str]:
    """The messages of the run's failure events (what the UI shows on the run's page)."""
    with dg.DagsterInstance.get() as instance:
        changes = instance.fetch_run_status_changes(dg.DagsterEventType.RUN_FAILURE, limit=100).records
        return [c.event_log_entry.message for c in changes if c.event_log_entry.run_id == run_id]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(path))
    return path


def test_a_run_killed_in_vector_index_is_failed_by_the_next_run_with_no_daemon(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = generate(5, sections_per_page=2, seed=21)
    with DocsSite() as site:
        site.publish(pages.markdown())
        sources = sources_file(tmp_path / "sources.yaml", site.sitemap_url)
        monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
        dead = freshness(env_for(home, sources, crash="upsert"), "run")
        finish(dead)
        assert dead.returncode == -9  # SIGKILLed inside vector_index, before its commit
        with dg.DagsterInstance.get() as instance:
            (record,) = instance.get_run_records()
            dead_id = record.dagster_run.run_id
            assert record.dagster_run.status == dg.DagsterRunStatus.STARTED
            assert dead_id in instance.event_log_storage.get_concurrency_run_ids()  # its `embeddings` slot

        nxt = freshness(env_for(home, sources), "run", "--json")
        out, err = finish(nxt)
        assert nxt.returncode == 0, out + err[-3000:]
        assert f"docs: run {dead_id} failed: its process (" in err, err
        with dg.DagsterInstance.get() as instance:
            failed = instance.get_run_record_by_id(dead_id)
            assert failed is not None and failed.dagster_run.status == dg.DagsterRunStatus.FAILURE
            assert failed.end_time is not None
        (reason,) = failure_reasons(dead_id)
        assert "its process (" in reason and "is gone" in reason, reason
        # `status`: the next run is the last attempt, and the dead run's failure is still shown.
        status = subprocess.run(
            [sys.executable, "-m", "freshness_pipeline.cli", "status"],
            env=env_for(home, sources),
            capture_output=True,
            text=True,
            timeout=600,
        )
        shown = [line for line in status.stdout.splitlines() if f"(run {dead_id})" in line]
        assert len(shown) == 1 and "earlier attempt" in shown[0] and " failure " in shown[0], status.stdout
        assert "its process (" in shown[0] and "is gone" in shown[0], status.stdout
        converged(env_for(home, sources), pages, site.base_url)


def test_kill_9_at_ten_random_moments_then_a_run_converges(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(53)
    site_now = generate(10, sections_per_page=2, seed=5)
    with DocsSite() as site:
        site.publish(site_now.markdown())
        sources = sources_file(tmp_path / "sources.yaml", site.sitemap_url)
        monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
        env = env_for(home, sources)
        started = time.monotonic()
        first = freshness(env, "run")
        out, err = finish(first)
        assert first.returncode == 0, out + err[-3000:]
        span = time.monotonic() - started  # a run's length on this host: the kills land within it
        for trial in range(TRIALS):
            page = rng.choice(sorted(site_now.pages))  # one page edited: no hold, no spike
            heading, _ = site_now.pages[page][0]
            site_now.pages[page][0] = (heading, paragraph(rng))
            site.publish(site_now.markdown())
            victim = freshness(env, "run")
            try:
                victim.wait(timeout=rng.uniform(0, span))
            except subprocess.TimeoutExpired:
                os.killpg(victim.pid, signal.SIGKILL)
            finish(victim)
            nxt = freshness(env, "run", "--json")
            out, err = finish(nxt)
            assert nxt.returncode == 0, f"trial {trial}: " + out + err[-3000:]
            assert json.loads(out.splitlines()[-1])["status"] == "success", out
            converged(env, site_now, site.base_url)


def test_a_second_run_waits_for_the_first_up_to_its_bound(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's run lock held by a live process (this test): `freshness run` says it waits,
    then exits 2 with one line once `runs.source_wait_s` passed; started again and the lock
    let go while it waits, it runs."""
    pages = generate(3, sections_per_page=2, seed=8)
    with DocsSite() as site:
        site.publish(pages.markdown())
        sources = sources_file(tmp_path / "sources.yaml", site.sitemap_url, wait_s=1.0)
        monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
        with holding_source(load_settings(sources), "docs"):
            refused = freshness(env_for(home, sources), "run")
            out, err = finish(refused)
        assert refused.returncode == 2, out + err
        waiting, error = err.splitlines()
        assert waiting == "docs: waiting for another `freshness run` of it to end, at most 1 s (runs.source_wait_s)"
        assert error.startswith("error: docs: another `freshness run` of it was still running after 1 s"), err

        patient = sources_file(tmp_path / "patient.yaml", site.sitemap_url, wait_s=600.0)
        with holding_source(load_settings(patient), "docs"):
            second = freshness(env_for(home, patient), "run")
            assert second.stderr is not None
            assert second.stderr.readline().startswith("docs: waiting for another `freshness run`")
        out, err = finish(second)
        assert second.returncode == 0, out + err
        assert out.startswith("docs: "), out
