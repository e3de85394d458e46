"""`freshness run` on the embedded instance executes each refresh in its own process as a run
of the `refresh` job recorded in the instance; against a deployment (`--submit URL`) it
submits the run to a real `dagster-webserver`, whose daemon launches it, waits for it and
prints the same counts, read from the run's own record in the state store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.config import load_settings
from freshness_pipeline.defs.remote import QUEUED_SAID_AFTER
from freshness_pipeline.defs.run_status import ended
from freshness_pipeline.defs.runner import run_refresh
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.run_record import OUTSIDE
from freshness_pipeline_tests.dagster_services import daemon, stop_sensors, webserver
from freshness_pipeline_tests.defs.harness import SOURCE
from freshness_pipeline_tests.processes import as_in_a_terminal, in_own_group, stop_group
from freshness_pipeline_tests.sitegen import generate

REPO = Path(__file__).resolve().parents[2]
COUNTS = ("new", "changed", "unchanged", "deleted", "embedded")


def index_metadata(instance: dg.DagsterInstance, run_id: str) -> dict[str, object]:
    """vector_index's materialization metadata in run `run_id` (Dagster's public read)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("vector_index"), asset_partitions=[SOURCE]), limit=20
    ).records
    (found,) = [r.asset_materialization for r in records if r.run_id == run_id]
    assert found is not None
    return {k: v.value for k, v in found.metadata.items()}


def test_a_refresh_is_a_run_of_the_refresh_job_in_the_instance(sources: Path, site: DocsSite) -> None:
    site.publish(generate(4, sections_per_page=2, seed=8).markdown())
    outcome = run_refresh(SOURCE, tier="hot")
    assert outcome["status"] == "success", outcome
    with dg.DagsterInstance.get() as instance:
        record = instance.get_run_record_by_id(outcome["run_id"])
        assert record is not None
        run = record.dagster_run
        assert run.job_name == "refresh" and run.status == dg.DagsterRunStatus.SUCCESS
        assert run.tags["dagster/partition"] == SOURCE and run.tags["freshness/tier"] == "hot"
        indexed = index_metadata(instance, run.run_id)
    assert {k: outcome[k] for k in COUNTS} == {k: indexed[k] for k in COUNTS}
    assert outcome["new"] == 4 and outcome["embedded"] == 4 * 2, outcome  # pages, sections


class _Broker(dg.ConfigurableResource):
    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        raise ConnectionError("broker at 127.0.0.1:9 refused the connection")


@dg.asset
def _needs_broker(broker: _Broker) -> int:
    return 1


def test_a_run_that_fails_outside_its_steps_says_so(sources: Path, instance: dg.DagsterInstance) -> None:
    """A resource that did not start: no step of the run recorded anything, and the outcome
    gives the run's failure as Dagster has it, not its error records."""
    result = dg.materialize([_needs_broker], resources={"broker": _Broker()}, instance=instance, raise_on_error=False)
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    outcome = ended(instance, load_settings(), run)
    assert outcome["status"] == "failure" and outcome["run_id"] == result.run_id
    # Dagster's run failure, as the UI shows it on the run's page
    assert outcome["message"].startswith(f"{OUTSIDE}: Execution of run for "), outcome


def _queued_then_ctrl_c(env: dict[str, str], url: str, err: Path) -> str:
    """`freshness run --submit` with no daemon to launch its run: it says once that the run is
    still queued; a Ctrl-C then says the run goes on in the deployment. The run's id."""
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--submit", url]
    with err.open("w") as log:
        waiting = in_own_group(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=as_in_a_terminal)
    try:
        deadline = (
            time.monotonic() + 120 + QUEUED_SAID_AFTER * load_settings(Path(env["FRESHNESS_SOURCES"])).runs.poll_s
        )
        while "is still QUEUED" not in err.read_text() and time.monotonic() < deadline and waiting.poll() is None:
            time.sleep(0.2)
        (said,) = [line for line in err.read_text().splitlines() if "is still QUEUED" in line]
    finally:
        stop_group(waiting)
    last = err.read_text().rstrip().splitlines()[-1]
    assert last.startswith(f"freshness: interrupted: the submitted runs go on in the deployment: {SOURCE} "), last
    run_id = last.rsplit(" ", 1)[1]
    assert said.startswith(f"{SOURCE}: run {run_id} is still QUEUED: the deployment's dagster-daemon launches it"), said
    return run_id


def _cli(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_run_submit_goes_through_a_real_webserver_and_prints_the_runs_counts(
    sources: Path, site: DocsSite, dagster_home: Path, tmp_path: Path
) -> None:
    site.publish(generate(3, sections_per_page=2, seed=9).markdown())
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(dagster_home), "FRESHNESS_SOURCES": str(sources)}
    with webserver(env, tmp_path / "webserver.log") as url:
        stop_sensors(url)  # no run of theirs beside the test's (those that launch runs load stopped)
        queued = _queued_then_ctrl_c(env, url, tmp_path / "queued.err")  # no daemon yet
        with daemon(env, tmp_path / "daemon.log"):
            done = _cli(env, "run", "--submit", url, "--json")  # waits in the queue behind that one
            text = _cli({**env, "FRESHNESS_DAGSTER_URL": url}, "run")  # the variable instead of the option
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    with dg.DagsterInstance.get() as instance:  # the run the Ctrl-C'd command left went on, and ended
        left = instance.get_run_by_id(queued)
        assert left is not None and left.status == dg.DagsterRunStatus.SUCCESS, left
    (outcome,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert outcome["status"] == "success" and outcome["source"] == SOURCE, outcome
    with dg.DagsterInstance.get() as instance:
        record = instance.get_run_record_by_id(outcome["run_id"])
        assert record is not None
        # Launched by the daemon from the code location (not executed by the CLI): its origin.
        assert record.dagster_run.job_name == "refresh" and record.dagster_run.remote_job_origin is not None
        assert record.dagster_run.tags["dagster/partition"] == SOURCE
        indexed = index_metadata(instance, outcome["run_id"])
    assert {k: outcome[k] for k in COUNTS} == {k: indexed[k] for k in COUNTS}
    assert text.returncode == 0 and text.stdout.startswith(f"{SOURCE}: "), text.stdout + text.stderr[-3000:]


def test_a_deployment_executor_without_submit_is_refused(sources: Path, dagster_home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FRESHNESS_EXECUTOR": "celery", "DAGSTER_HOME": str(dagster_home)}
    env.pop("FRESHNESS_DAGSTER_URL", None)
    done = _cli(env, "run", timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "$FRESHNESS_EXECUTOR=celery" in done.stderr and "--submit URL" in done.stderr, done.stderr


def test_the_code_location_imports_without_fcntl(dagster_home: Path) -> None:
    """Where `fcntl` does not exist (Windows), the code location still loads."""
    script = (
        "import sys; sys.modules['fcntl'] = None\n"  # `import fcntl` now raises ImportError
        "from freshness_pipeline.defs.definitions import defs\n"
        "defs.resolve_job_def('refresh'); print('loaded')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(dagster_home)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "loaded", done.stderr[-3000:]
