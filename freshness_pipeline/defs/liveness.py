"""Runs whose process is gone, found and closed.

A SIGKILLed run stays STARTED in the instance and keeps its `embeddings` pool slot: later
runs wait for that slot forever, and `tier_cadence_sensor` sees the source as busy forever.
Dagster's run monitoring only catches this for run launchers with a health check (the
default launcher has none), and frees the slots of *finished* runs only. So `reap_dead_runs`
(called by the runner before each launch and by the tier sensor on every tick) marks a
started run failed when none of the processes that ran it is alive, then frees the slots
of every finished run.

The processes are the pids Dagster records in the run's engine events ("Started process
for run (pid: …)", "Executing steps in process (pid: …)", step subprocesses). A pid only
means something on the host that ran it, so only runs of this host are judged: tagged
`HOST_TAG` (every run the runner and the sensors make), or, for a run launched without the
tag (the UI's "Materialize", a backfill: Dagster gives those runs no tags of the job), a run
whose process logged this host when its resources started (`host_line`, written by
`FreshnessResource`). A pid reused by a newer process does not count as alive.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Sequence
from contextlib import suppress

import dagster as dg

from .tags import HOST_TAG, this_host

__all__ = ["HOST_TAG", "host_line", "interrupt_runs", "reap_dead_runs", "this_host", "wait_for_run_worker"]
HOST_LINE = f"{HOST_TAG}: "  # how a run without the tag logs its host
FIRST_EVENTS = 200  # a run's events searched for that line (resources start first)
RUNNING = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
LOOKBACK = 200  # running runs examined per call
INTERRUPT_GRACE_S = 3.0  # how long `interrupt_runs` lets runs end by themselves

log = logging.getLogger(__name__)


def host_line() -> str:
    """What a run launched without `HOST_TAG` logs when its resources start."""
    return f"{HOST_LINE}{this_host()}"


def reap_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Fail the runs of this host whose processes are all gone and free the pool slots that
    finished runs still hold. Returns the ids of the runs it failed."""
    dead: list[str] = []
    if not instance.run_launcher.supports_check_run_worker_health:  # else Dagster's monitoring does it
        running = instance.get_run_records(dg.RunsFilter(statuses=RUNNING), limit=LOOKBACK)
        for record in running:
            if _host(instance, record.dagster_run) != this_host():
                continue
            pids = _run_pids(instance, record.dagster_run.run_id)
            if pids and not any(_alive(pid, seen) for pid, seen in pids.items()):
                message = f"the run's processes ({', '.join(map(str, sorted(pids)))}) are gone: killed or crashed"
                instance.report_run_failed(record.dagster_run, message=message)
                dead.append(record.dagster_run.run_id)
                log.warning(f"run {record.dagster_run.run_id}: {message}; marked failed")
    _free_slots_of_finished_runs(instance)
    return dead


def wait_for_run_worker(instance: dg.DagsterInstance, run_id: str, timeout_s: float) -> bool:
    """Wait until the process that ran `run_id` (the first pid its events name) has exited:
    a finished run's worker still flushes and exits for a few tenths of a second. False at
    the timeout. Like `reap_dead_runs`, only for launchers without a health check (local
    processes)."""
    pids = _run_pids(instance, run_id)
    if not pids or instance.run_launcher.supports_check_run_worker_health:
        return True
    pid, seen = next(iter(pids.items()))
    deadline = time.monotonic() + timeout_s
    while _alive(pid, seen):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)  # a look at /proc: cheap beside what a caller waits for
    return True


def interrupt_runs(instance: dg.DagsterInstance, run_ids: Sequence[str]) -> None:
    """SIGINT the live processes of those of these runs (launched by this host) that have not
    ended within `INTERRUPT_GRACE_S`: what the command does when a Ctrl-C reached it alone
    (`kill -INT` of its pid rather than of its terminal's process group), which would leave
    them running to their end with nobody waiting. Dagster fails an interrupted run
    (`DagsterExecutionInterruptedError`), as on a terminal's Ctrl-C; that one reaches the
    run workers by itself, hence the grace, so that they are not interrupted twice."""
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    pending = list(run_ids)
    while pending:
        runs = {r.dagster_run.run_id: r.dagster_run for r in instance.get_run_records(dg.RunsFilter(run_ids=pending))}
        pending = [run_id for run_id in pending if run_id in runs and not runs[run_id].is_finished]
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for run_id in pending:
        for pid, seen in _run_pids(instance, run_id).items():
            if _alive(pid, seen):
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGINT)
                log.warning(f"run {run_id}: interrupted its process {pid}")


def _free_slots_of_finished_runs(instance: dg.DagsterInstance) -> None:
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    holders = storage.get_concurrency_run_ids()
    if not holders:
        return
    finished = instance.get_run_records(dg.RunsFilter(run_ids=list(holders), statuses=FINISHED))
    for record in finished:
        storage.free_concurrency_slots_for_run(record.dagster_run.run_id)
        log.info(f"freed the pool slots of finished run {record.dagster_run.run_id}")


def _host(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str | None:
    """The host that ran `run`: its tag, else the host its process logged, else unknown."""
    if HOST_TAG in run.tags:
        return run.tags[HOST_TAG]
    for record in instance.get_records_for_run(run.run_id, limit=FIRST_EVENTS).records:
        entry = record.event_log_entry
        if entry.dagster_event is None and entry.user_message.startswith(HOST_LINE):
            return entry.user_message.removeprefix(HOST_LINE)
    return None


def _run_pids(instance: dg.DagsterInstance, run_id: str) -> dict[int, float]:
    """Pid -> when an engine event of the run first named it."""
    events = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records
    pids: dict[int, float] = {}
    for e in events:
        event = e.event_log_entry.dagster_event
        value = event.engine_event_data.metadata.get("pid") if event and event.engine_event_data else None
        if value is not None and (pid := str(value.value)).isdigit():
            pids.setdefault(int(pid), e.event_log_entry.timestamp)
    return pids


def _alive(pid: int, seen: float) -> bool:
    """The pid runs, and is not a newer process that reused it after the run named it. A
    process that exited and waits for its parent to collect it (a zombie: a spawned run
    worker until its code server reaps it, a quarter of a second later) runs no more."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    stat = _process_stat(pid)
    if stat is None:
        return True
    state, started = stat
    return state not in ("Z", "X") and started <= seen + 1.0


def _process_stat(pid: int) -> tuple[str, float] | None:
    """A process's state letter and start time (epoch seconds) from /proc; None where
    there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()  # after the command's name
        with open("/proc/stat") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        state, ticks = fields[0], int(fields[19])  # fields 3 and 22 of proc(5)
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return state, boot + ticks / os.sysconf("SC_CLK_TCK")
