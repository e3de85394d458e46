"""Run one refresh through Dagster from Python (what `freshness run` and the demo do).

The run belongs to the code location `freshness_pipeline`: it is created and submitted by
`dagster job launch` (Dagster's public launch path) against the workspace of this module, so
it appears on the `refresh` job's page, can be re-executed from the UI, and goes through the
instance's run coordinator: queued while a daemon dequeues, launched at once when none runs
(`coordinator.py`). This process waits for the run and reads what it did from the instance.

A launch costs two process starts: the code server (`launch.py`, started before this
process imports Dagster) and the run worker; each loads the code location (`make
bench-overhead` measures them). `dagster job launch` itself runs in this process.
`FRESHNESS_LAUNCH=in-process` (or `in_process=True`) runs the job inside this process instead, as a run without a code
location origin: the test suite does so for speed, and tests the launch path on its own.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import dagster as dg

from .. import progress
from ..adapters.memory import collections_paused
from .coordinator import daemon_running
from .launch import JOB, LAUNCH_ENV, Launcher, LaunchError, in_process_runs, launchers, run_config
from .liveness import interrupt_runs, reap_dead_runs, wait_for_run_worker
from .partitions import sources_partitions
from .pools import ensure_pools
from .run_summary import interrupted, summarize
from .tags import run_tags

__all__ = ["LAUNCH_ENV", "LaunchError", "run_refresh", "run_refreshes", "summarize"]
POLL_S = 0.1  # a read of the run's row (3.5 ms of CPU): what a finished run waits for at most
REAP_EVERY = 50  # polls between two looks for a dead run worker (5 s)
WORKER_EXIT_S = 30.0  # how long a finished run's worker may take to exit

logger = logging.getLogger(__name__)


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
    ((_, outcome),) = run_refreshes([source], tier=tier, tags=tags, log_level=log_level, in_process=in_process)
    return outcome


def run_refreshes(
    sources: list[str],
    *,
    tier: str | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "WARNING",
    in_process: bool | None = None,
    prestarted: dict[str, Launcher] | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Refresh several sources: launched, every source's run is launched first, then each is
    waited for in turn (their steps run side by side, `vector_index` one at a time through
    the `embeddings` pool); in-process, one after the other. Yields (source, what
    `run_refresh` returns) in the order given, each as soon as its run ended. `prestarted`:
    the launchers of `launch.launchers`, whose code server started before this process
    imported Dagster (what `freshness run` does); each launches once the partitions exist."""
    started: AbstractContextManager[dict[str, Launcher]]
    if in_process_runs(in_process):
        started = nullcontext({})
    elif prestarted is not None:
        started = nullcontext(prestarted)
    else:
        started = launchers(sources, run_tags(tier, tags), log_level)
    with started as gated:
        with collections_paused():  # the instance imports Dagster's storage modules
            instance = dg.DagsterInstance.get()
        reap_dead_runs(instance)  # a killed run's pool slot would make these runs wait forever
        ensure_pools(instance)  # before these runs (and other commands' runs) race to make them
        partitions = str(sources_partitions.name)
        new = [s for s in dict.fromkeys(sources) if not instance.has_dynamic_partition(partitions, s)]
        if new:
            instance.add_dynamic_partitions(partitions, new)
        if not gated:
            from .definitions import defs  # a launched run loads them in its own process

            for source in sources:
                result = defs.resolve_job_def(JOB).execute_in_process(
                    instance=instance,
                    partition_key=source,
                    tags=run_tags(tier, tags),
                    raise_on_error=False,
                    run_config={"loggers": run_config(log_level)["loggers"]},
                )
                if interrupted(result.all_events):  # a Ctrl-C, which Dagster made a failed run
                    raise KeyboardInterrupt  # the command stops, as it does launched
                yield source, summarize(instance, result.run_id)
            return
        try:
            yield from _launched(instance, sources, gated)
        except KeyboardInterrupt:
            interrupt_runs(instance, [launcher.run_id for launcher in gated.values()])
            raise


def _launched(
    instance: dg.DagsterInstance, sources: list[str], gated: dict[str, Launcher]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Launch every source's run (the partitions exist, dead runs are reaped), then wait
    for each; a launch that failed is its source's failure."""
    failed: dict[str, LaunchError] = {}
    for source, launcher in gated.items():
        try:
            launcher.go()
        except LaunchError as exc:
            failed[source] = exc
    for source in sources:
        error, run_id = failed.get(source), None
        if error is None:
            try:
                run_id = _finish(instance, gated[source])
            except LaunchError as exc:
                error = exc
        if run_id is None:
            yield source, {"run_id": None, "status": "failure", "message": str(error), "checks": []}
        else:
            yield source, summarize(instance, run_id)


def _finish(instance: dg.DagsterInstance, launcher: Launcher) -> str:
    """Wait until the launched run ended and its worker exited; its id."""
    _wait(instance, launcher.run_id)
    # The run worker exits a few tenths of a second after its run ended. The code server is
    # stopped only after that (`launch.py`): stopped earlier, or left running while a caller
    # removes the home (a test's teardown, a CI job), its cleanup thread fails on the missing
    # instance.
    if wait_for_run_worker(instance, launcher.run_id, WORKER_EXIT_S):
        launcher.ended()
    else:
        logger.warning(f"run {launcher.run_id} ended, but its process still runs after {WORKER_EXIT_S:.0f} s")
    return launcher.run_id


def _wait(instance: dg.DagsterInstance, run_id: str) -> None:
    """Until the run ends (its launch submitted it: queued or launched); a run whose worker
    died is failed (`liveness.py`), which ends the wait."""
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
        if run is None:  # its launch ended without an error: not expected
            raise LaunchError(f"dagster job launch did not create run {run_id}")
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
