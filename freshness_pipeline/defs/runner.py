"""Run refreshes through Dagster from Python (what `freshness run`, the entry point and the
demo do on the embedded instance).

Each refresh is a run of the `refresh` job for the source's partition, recorded in the
instance (tags, checks, materializations; listed on the job's page in the UI, re-executable
from there) and executed in this process by `execute_in_process`, each step in turn. A
deployment's runs are submitted through its webserver instead (`remote.py`).

One `freshness run` of a source at a time: each run holds the source's run lock
(`pipeline/source_runs.py`), so a run of the source that a `freshness run` executed and that
is still in flight once the lock is ours lost its process, and is failed at once
(`dead_runs.py`), daemon or not.

A Ctrl-C (or SIGTERM) inside a run is Dagster's: it fails the run's step and the run. That
one reached this process is observed, never handled (`adapters/interrupts.py`). Wherever it
lands, the state store says whether the run's commit landed (it records the run id with each
commit): `Interrupted.committed`.

What each run did is its own record in the state store, read with its status (`run_status.py`).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

from ..adapters.interrupts import observing
from ..config import ConfigError, Settings, load_settings
from ..pipeline.attempts import committed, record_attempt
from ..pipeline.errors import Interrupted, SourceWaitExpired
from ..pipeline.source_runs import SourceHold, holding_source
from .dead_runs import fail_dead_run
from .executors import EXECUTOR_ENV, executor_name
from .instance import instance_variables
from .partitions import SOURCES
from .remote import URL_ENV
from .run_status import ended
from .tags import PARTITION_TAG, run_tags

__all__ = ["Interrupted", "run_refresh", "run_refreshes"]
JOB = "refresh"
IN_FLIGHT_POLL_S = 1.0  # how often a source's run in flight (the UI's, a sensor's) is looked at
IN_FLIGHT = [dg.DagsterRunStatus(s) for s in ("QUEUED", "STARTING", "STARTED", "CANCELING")]
STOPPED = "interrupted by a Ctrl-C before its commit landed: nothing of it was committed"


def run_refresh(
    source: str, *, tier: str | None = None, tags: dict[str, str] | None = None, log_level: str = "WARNING"
) -> dict[str, Any]:
    """Refresh one source and say how it went (`run_status.ended`). `log_level` is for the
    run's console only; the instance keeps every event."""
    ((_, done),) = run_refreshes(load_settings(), [source], tier=tier, tags=tags, log_level=log_level)
    return done


def run_refreshes(
    settings: Settings,
    sources: list[str],
    *,
    tier: str | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "WARNING",
    sources_file: str | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Refresh several sources, one run after the other; yields (source, outcome) as each
    run ends. Each run holds its source's run lock (`pipeline/source_runs.py`), waiting at
    most `runs.source_wait_s` for another `freshness run` of it; a run of the source that a
    `freshness run` executed and that is still in flight once the lock is ours lost its
    process, and is failed (`dead_runs.py`); one of the UI or a sensor is waited for within
    the same bound. Raises `Interrupted` on a Ctrl-C. Runs on `settings.home`'s instance."""
    if (name := executor_name()) != "in_process":  # execute_in_process would ignore it
        raise ConfigError(
            f"${EXECUTOR_ENV}={name}: its runs execute on the deployment, not in this process; "
            f"submit them to its webserver with `freshness run --submit URL` (or ${URL_ENV})"
        )
    with _instance(settings) as instance:
        config = _run_config(settings, sources_file, log_level)
        order = list(dict.fromkeys(sources))
        _add_partitions(instance, order)
        from .definitions import defs  # the code location, loaded once the instance is ready

        job = defs.resolve_job_def(JOB)
        for i, source in enumerate(order):
            run_id, stopped = str(uuid.uuid4()), False
            try:
                with holding_source(settings, source) as hold, observing() as signals:
                    end_dead_runs(instance, settings, hold)
                    wait_for_runs_in_flight(instance, source, settings.runs.source_wait_s)
                    hold.executing(run_id)
                    job.execute_in_process(
                        instance=instance,
                        partition_key=source,
                        run_id=run_id,
                        tags=run_tags(tier, tags),
                        raise_on_error=False,
                        run_config=config,
                    )
                    stopped = signals.stopped()  # a Ctrl-C (Dagster makes it a failed run) or a SIGTERM
            except KeyboardInterrupt:  # outside the run's steps: before it, or as it ended
                stopped = True
            try:
                done = _summary(instance, run_id, settings)
            except KeyboardInterrupt:  # another Ctrl-C while it was read: read it once more
                stopped, done = True, _summary(instance, run_id, settings)
            if not stopped:
                yield source, done
                continue
            # The state store records each commit with its run id, in the commit's transaction.
            landed = committed(settings, source, run_id) is not None
            if landed:
                note = "interrupted by a Ctrl-C after its commit landed"
                yield source, {**done, "status": "success", "warnings": [*done.get("warnings", []), note]}
            elif done["run_id"] is not None:  # a run that started is the source's last attempt
                record_attempt(settings, source, {**done, "status": "failure", "message": STOPPED})
            raise Interrupted(source, landed, order[i + 1 :])


@contextmanager
def _instance(settings: Settings) -> Iterator[dg.DagsterInstance]:
    """The home's instance, its storages closed at the end. One that cannot be opened (the
    database its dagster.yaml names out of reach, a variable it reads unset) is one line."""
    where = f"the Dagster instance of {settings.home} (its dagster.yaml)"
    if unset := [name for name in instance_variables(settings.home) if name not in os.environ]:
        raise ConfigError(f"{where} reads {', '.join(sorted(unset))}, not set in this environment")
    try:
        opened = dg.DagsterInstance.local_temp(str(settings.home))
    except Exception as exc:  # whatever its storage raises: Dagster's, or its database driver's
        why = (str(exc).strip().splitlines() or [""])[0][:300]
        raise ConfigError(f"{where} cannot be opened: {type(exc).__name__}: {why}") from exc
    with opened as instance:
        yield instance


def _add_partitions(instance: dg.DagsterInstance, sources: list[str]) -> None:
    """The sources' partitions that are missing (a read each, a write only when one is)."""
    if missing := [s for s in sources if not instance.has_dynamic_partition(SOURCES, s)]:
        instance.add_dynamic_partitions(SOURCES, missing)


def _run_config(settings: Settings, sources_file: str | None, log_level: str) -> dict[str, Any]:
    """The run's console level, and its resource's home and sources file (not the environment's)."""
    resource = {"home": str(settings.home), "sources_file": sources_file}
    return {
        "loggers": {"console": {"config": {"log_level": log_level}}},
        "resources": {"freshness": {"config": resource}},
    }


def _summary(instance: dg.DagsterInstance, run_id: str, settings: Settings) -> dict[str, Any]:
    """The run's outcome from its record and its status; none if it never started."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return {"run_id": None, "status": "failure", "message": "interrupted before its run started"}
    return ended(instance, settings, run)


def end_dead_runs(instance: dg.DagsterInstance, settings: Settings, hold: SourceHold) -> None:
    """Fail the source's runs in flight that a `freshness run` executed: with its run lock
    ours, their process is gone (killed, out of memory, a machine that slept through it)."""
    busy = dg.RunsFilter(tags={PARTITION_TAG: hold.source}, statuses=IN_FLIGHT)
    in_flight = {r.dagster_run.run_id: r.dagster_run for r in instance.get_run_records(busy)}
    for run_id, holder in sorted(hold.dead(list(in_flight)).items()):
        reason = (
            f"its process ({holder}) is gone: the next `freshness run` of {hold.source} found the "
            "source's run lock free while the run was still in flight, and failed it"
        )
        fail_dead_run(instance, in_flight[run_id], reason)
        record_attempt(settings, hold.source, {"run_id": run_id, "status": "failure", "message": reason})
        print(f"{hold.source}: run {run_id} failed: {reason}", file=sys.stderr, flush=True)


def wait_for_runs_in_flight(instance: dg.DagsterInstance, source: str, wait_s: float) -> None:
    """Until no other run of `source` (the UI's, a sensor's, launched by the deployment's
    daemon) is queued or in progress, at most `wait_s` (`SourceWaitExpired` after that);
    said once, on stderr."""
    busy = dg.RunsFilter(tags={PARTITION_TAG: source}, statuses=IN_FLIGHT)
    deadline, said = time.monotonic() + wait_s, False
    while records := instance.get_run_records(busy, limit=1):
        run = records[0].dagster_run
        if time.monotonic() >= deadline:
            raise SourceWaitExpired(
                f"{source}: run {run.run_id} of it is still {run.status.value} after {wait_s:g} s "
                "(runs.source_wait_s); a run whose process is gone is failed by dagster-daemon's run "
                "monitoring, or terminate it in the UI"
            )
        if not said:
            print(
                f"{source}: waiting for run {run.run_id} ({run.status.value}) to end, at most {wait_s:g} s "
                "(runs.source_wait_s)",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(IN_FLIGHT_POLL_S)
