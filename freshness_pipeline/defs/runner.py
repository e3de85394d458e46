"""Run one refresh through Dagster from Python (what `freshness run` and the demo do).

The run belongs to the code location `freshness_pipeline`: it is created and submitted by
`dagster job launch` (Dagster's public launch path) against the workspace of this module, so
it appears on the `refresh` job's page, can be re-executed from the UI, and goes through the
instance's run coordinator: queued while a daemon dequeues, launched at once when none runs
(`coordinator.py`). This process waits for the run and reads what it did from the instance.

A launch costs process starts (the launcher, its code server and the run worker each load the
code location: about 15 s on 2 busy cores, see docs/dagster.md). `FRESHNESS_LAUNCH=in-process`
(or `in_process=True`) runs the job inside this process instead, as a run without a code
location origin: the test suite does so for speed, and tests the launch path on its own.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import IO, Any

import dagster as dg
import yaml

from .. import progress
from .coordinator import daemon_running
from .executors import executor_name
from .liveness import HOST_TAG, reap_dead_runs, this_host, wait_for_run_worker
from .metadata import INDEX_EXTRAS
from .partitions import SOURCES
from .tags import TIER_TAG

LAUNCH_ENV = "FRESHNESS_LAUNCH"  # "in-process": execute_in_process, no code location origin
LOCATION = "freshness_pipeline"
JOB = "refresh"
MODULE = {"module_name": "freshness_pipeline.defs.definitions", "attribute": "defs", "location_name": LOCATION}
WORKSPACE = {"load_from": [{"python_module": MODULE}]}
POLL_S = 0.5
REAP_EVERY = 10  # polls between two looks for a dead run worker
WORKER_EXIT_S = 30.0  # how long a finished run's worker may take to exit
SHOWN_ERRORS = 20
STDERR_FD = 2

logger = logging.getLogger(__name__)


class LaunchError(RuntimeError):
    """`dagster job launch` did not create the run (its error is in the message)."""


def run_refresh(
    source: str,
    *,
    tier: str | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "WARNING",
    in_process: bool | None = None,
) -> dict[str, Any]:
    """Refresh one source and say how it went:

    `status` ("success" | "blocked" | "failure") and `message`; the run's counts whenever
    `vector_index` produced them (else what the crawl knows: `crawled`, `errors`);
    `checks`, every asset check that did not pass; `error_pages` and `flagged_pages`.
    `log_level` is for the run's console only; the instance keeps every event."""
    instance = dg.DagsterInstance.get()
    reap_dead_runs(instance)  # a killed run's pool slot would make this run wait forever
    if not instance.has_dynamic_partition(SOURCES, source):
        instance.add_dynamic_partitions(SOURCES, [source])
    run_tags = {**(tags or {}), HOST_TAG: this_host(), **({TIER_TAG: tier} if tier else {})}
    logs = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    if in_process if in_process is not None else os.environ.get(LAUNCH_ENV) == "in-process":
        from .definitions import defs  # a launched run loads them in its own process

        result = defs.resolve_job_def(JOB).execute_in_process(
            instance=instance, partition_key=source, tags=run_tags, raise_on_error=False, run_config=logs
        )
        run_id = result.run_id
    else:
        verbose = log_level in ("DEBUG", "INFO")
        try:
            run_id = launch(instance, {**run_tags, "dagster/partition": source}, logs, verbose=verbose)
        except LaunchError as exc:
            return {"run_id": None, "status": "failure", "message": str(exc), "checks": []}
    return summarize(instance, run_id)


def launch(instance: dg.DagsterInstance, tags: dict[str, str], run_config: dict, *, verbose: bool) -> str:
    """Create and submit a `refresh` run of the code location, wait until it ends, return its id."""
    run_id = str(uuid.uuid4())
    if executor_name() == "default":  # one run worker runs every step: no process per step
        run_config = {**run_config, "execution": {"config": {"in_process": {}}}}
    with tempfile.TemporaryDirectory(prefix="freshness-launch-") as tmp:
        workspace = Path(tmp) / "workspace.yaml"
        workspace.write_text(yaml.safe_dump(WORKSPACE))
        cmd = [sys.executable, "-m", "dagster", "job", "launch", "-w", str(workspace), "-l", LOCATION, "-j", JOB]
        cmd += ["--run-id", run_id, "--tags", json.dumps(tags), "--config-json", json.dumps(run_config)]
        with open(Path(tmp) / "launch.log", "w+") as log:
            # Verbose: Dagster's lines (the launcher's, its code server's) on this process's
            # stderr, so that stdout holds only the summary (`--json` stays parseable).
            out = STDERR_FD if verbose else log
            proc = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
            try:
                _wait(instance, run_id, proc, log)
            finally:
                _stop(proc)
    # The run worker exits about a second after its run ended. Returning before it did, a
    # caller that then removes the home or the database (a test's teardown, a CI job) left
    # the code server's cleanup thread failing on the missing instance, and the server
    # running forever (~270 MB).
    if not wait_for_run_worker(instance, run_id, WORKER_EXIT_S):
        logger.warning(f"run {run_id} ended, but its process still runs after {WORKER_EXIT_S:.0f} s")
    return run_id


def _wait(instance: dg.DagsterInstance, run_id: str, proc: subprocess.Popen, log: IO[str]) -> None:
    """Until the run ends. The launcher may exit early (queued) or late (its code server
    lingers until the run it started ends); a launcher that fails before the run exists fails;
    a run whose worker died is failed (`liveness.py`), which ends the wait."""
    cursor = None
    for polls in itertools.count():
        run = instance.get_run_by_id(run_id)
        if run is not None:  # relayed after reading the status: a finished run's last lines too
            cursor = _relay_progress(instance, run_id, cursor)
        if run is not None and run.is_finished:
            return
        if run is not None and polls % REAP_EVERY == REAP_EVERY - 1:
            reap_dead_runs(instance)
            if run.status == dg.DagsterRunStatus.QUEUED and not daemon_running(instance):
                raise LaunchError(
                    f"run {run_id} is queued but no dagster-daemon dequeues it (it stopped?): "
                    "start `dagster-daemon run`, or cancel the run in the UI"
                )
        if run is None and proc.poll() is not None:
            log.seek(0)
            tail = log.read()[-3000:].strip() or f"exit code {proc.returncode}"
            raise LaunchError(f"dagster job launch did not create run {run_id}: {tail}")
        time.sleep(POLL_S)


def _relay_progress(instance: dg.DagsterInstance, run_id: str, cursor: str | None) -> str | None:
    """The stage lines (discovery, fetch/extract, embed) the run logged since `cursor`,
    shown here: the run worker has no terminal of its own."""
    page = instance.get_records_for_run(run_id, cursor=cursor)
    for record in page.records:
        entry = record.event_log_entry
        if entry.dagster_event is None:
            progress.relay(entry.user_message)
    return page.cursor or cursor


def _stop(proc: subprocess.Popen) -> None:
    """The launcher's code server shuts down once its run ended; give it a minute."""
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def summarize(instance: dg.DagsterInstance, run_id: str) -> dict[str, Any]:
    """What `run_refresh` returns, read from the run's events (the assets' metadata), the
    same for both ways of running; no asset value is loaded."""
    run = instance.get_run_by_id(run_id)
    assert run is not None
    done = _materialized(instance, run_id)
    crawl, index = done.get("fetched_pages"), done.get("vector_index")
    out: dict[str, Any] = {"run_id": run_id}
    if index is not None:  # its metadata are the run's counts and a few extras
        out |= {k: v for k, v in index.items() if k not in INDEX_EXTRAS}
        out["reindex_reason"] = index.get("reindex_reason")
    elif crawl is not None:
        out |= {k: crawl[k] for k in ("crawled", "errors", "skipped")}
    if crawl is not None:
        review = crawl.get("pages_to_review") or {}
        out["skipped_pages"] = _first(review.get("skipped"))
        out["warnings"] = list(crawl.get("warnings") or [])
        out["error_pages"] = _first(review.get("errors"))
        out["flagged_pages"] = _first(review.get("flagged"))
    checked = _events(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    evaluations = [e.asset_check_evaluation_data for e in checked]
    out["checks"] = [
        {"name": e.check_name, "severity": e.severity.value, "passed": e.passed, "description": e.description}
        for e in evaluations
        if not e.passed
    ]
    blocked = [e for e in evaluations if e.blocking and not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    if blocked and index is None:
        message = "; ".join(f"{e.check_name}: {e.description or 'failed'}" for e in blocked)
        return {**out, "status": "blocked", "message": message}
    if run.status != dg.DagsterRunStatus.SUCCESS:
        return {**out, "status": "failure", "message": _failure(instance, run_id) or f"run {run.status.value}"}
    return {**out, "status": "success"}


def _first(pages: dict[str, str] | None) -> dict[str, str]:
    return dict(sorted((pages or {}).items())[:SHOWN_ERRORS])


def _events(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
    records = instance.get_records_for_run(run_id, of_type=kind).records
    return [r.event_log_entry.dagster_event for r in records if r.event_log_entry.dagster_event]


def _materialized(instance: dg.DagsterInstance, run_id: str) -> dict[str, dict[str, Any]]:
    """Asset -> its materialization's metadata values, for the assets this run materialized."""
    out = {}
    for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records:
        m = r.event_log_entry.asset_materialization
        if m is not None:
            out[m.asset_key.to_user_string()] = {k: v.value for k, v in m.metadata.items()}
    return out


def _failure(instance: dg.DagsterInstance, run_id: str) -> str:
    """The user errors of the failed steps (the cause, not Dagster's "Error occurred while
    executing op" wrapper), else the run's own failure message (a killed run, say)."""
    steps = [
        f"{e.step_key}: {(e.step_failure_data.error.cause or e.step_failure_data.error).message.strip()}"
        for e in _events(instance, run_id, dg.DagsterEventType.STEP_FAILURE)
        if e.step_failure_data.error
    ]
    if steps:
        return "; ".join(steps)
    return "; ".join(e.message or "" for e in _events(instance, run_id, dg.DagsterEventType.RUN_FAILURE)).strip()
