"""Run refreshes through Dagster from Python (what `freshness run`, the entry point and the
demo do on the embedded instance).

Each refresh is a run of the `refresh` job for the source's partition, recorded in the
instance (tags, checks, materializations; listed on the job's page in the UI, re-executable
from there) and executed in this process by `execute_in_process`, each step in turn. A
deployment's runs are submitted through its webserver instead (`remote.py`).

A Ctrl-C (or SIGTERM) inside a run is Dagster's: it fails the run's step and the run. Wherever
it lands, the state store says whether the run's commit landed (it records the run id with
each commit): `Interrupted.committed`.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import dagster as dg

from ..config import ConfigError, Settings
from ..pipeline.errors import Interrupted
from .executors import EXECUTOR_ENV, executor_name
from .partitions import sources_partitions
from .remote import URL_ENV
from .run_summary import from_events, interrupted, outcome
from .tags import PARTITION_TAG, run_tags

__all__ = ["Interrupted", "run_refresh", "run_refreshes"]
JOB = "refresh"
IN_FLIGHT_POLL_S = 1.0  # how often a source's run in flight (the UI's, a sensor's) is looked at
IN_FLIGHT = [dg.DagsterRunStatus(s) for s in ("QUEUED", "STARTING", "STARTED", "CANCELING")]


def run_refresh(
    source: str, *, tier: str | None = None, tags: dict[str, str] | None = None, log_level: str = "WARNING"
) -> dict[str, Any]:
    """Refresh one source and say how it went (`run_summary.outcome`). `log_level` is for
    the run's console only; the instance keeps every event."""
    ((_, done),) = run_refreshes([source], tier=tier, tags=tags, log_level=log_level)
    return done


def run_refreshes(
    sources: list[str],
    *,
    tier: str | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "WARNING",
    settings: Settings | None = None,
    sources_file: str | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Refresh several sources, one run after the other; yields (source, outcome) as each
    run ends. A source with a run queued or in progress (the UI's, a sensor's) is waited
    for first, as the run queue would. Raises `Interrupted` on a Ctrl-C.
    `settings` (read from `sources_file`): the home whose instance runs them, passed to the
    run's resource; without them, $DAGSTER_HOME's instance and $FRESHNESS_SOURCES."""
    if (name := executor_name()) != "in_process":  # execute_in_process would ignore it
        raise ConfigError(
            f"${EXECUTOR_ENV}={name}: its runs execute on the deployment, not in this process; "
            f"submit them to its webserver with `freshness run --submit URL` (or ${URL_ENV})"
        )
    instance = dg.DagsterInstance.local_temp(str(settings.home)) if settings else dg.DagsterInstance.get()
    where = {"home": str(settings.home), "sources_file": sources_file} if settings else {}
    order = list(dict.fromkeys(sources))
    instance.add_dynamic_partitions(str(sources_partitions.name), order)  # those it has are kept
    from .definitions import defs  # the code location, loaded once the instance is ready

    job = defs.resolve_job_def(JOB)
    for i, source in enumerate(order):
        run_id, result, stopped = str(uuid.uuid4()), None, False
        try:
            _wait_for_runs_in_flight(instance, source)
            result = job.execute_in_process(
                instance=instance,
                partition_key=source,
                run_id=run_id,
                tags=run_tags(tier, tags),
                raise_on_error=False,
                run_config={
                    "loggers": {"console": {"config": {"log_level": log_level}}},
                    "resources": {"freshness": {"config": where}},
                },
            )
            stopped = interrupted(result.all_events)  # Dagster made the Ctrl-C a failed run
        except KeyboardInterrupt:  # outside the run's steps: before it, or as it ended
            stopped = True
        try:
            done = _summary(instance, run_id, result, settings)
        except KeyboardInterrupt:  # another Ctrl-C while it was read: read it once more
            stopped, done = True, _summary(instance, run_id, result, settings)
        if not stopped:
            yield source, done
            continue
        landed = done.get("status") == "success" or bool(done.get("committed"))
        if landed:
            note = "interrupted by a Ctrl-C after its commit landed"
            yield source, {**done, "status": "success", "warnings": [*done.get("warnings", []), note]}
        raise Interrupted(source, landed, order[i + 1 :])


def _summary(
    instance: dg.DagsterInstance, run_id: str, result: dg.ExecuteInProcessResult | None, settings: Settings | None
) -> dict[str, Any]:
    """The run's outcome from its result, or (a Ctrl-C reached it outside its steps) from its
    status alone; none if it never started."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return {"run_id": None, "status": "failure", "message": "interrupted before its run started"}
    return outcome(from_events(run, result.all_events if result is not None else []), settings)


def _wait_for_runs_in_flight(instance: dg.DagsterInstance, source: str) -> None:
    """Until no other run of `source` is queued or in progress (one run per source, as the
    run queue keeps it for the runs it launches). A run whose process was killed stays
    STARTED until run monitoring (the daemon) fails it: said once, on stderr."""
    busy = dg.RunsFilter(tags={PARTITION_TAG: source}, statuses=IN_FLIGHT)
    said = False
    while records := instance.get_run_records(busy, limit=1):
        if not said:
            run = records[0].dagster_run
            print(
                f"{source}: waiting for run {run.run_id} ({run.status.value}) to end; a run whose process "
                "is gone is failed by dagster-daemon's run monitoring (max_runtime_seconds), or terminate "
                "it in the UI",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(IN_FLIGHT_POLL_S)
