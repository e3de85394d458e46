"""`adapters/interrupts.py` (docs/decisions/0005): a SIGINT or SIGTERM that reaches the
process is observed whatever handler runs for it, and Dagster's `execute_in_process` still
swallows a Ctrl-C into a failed run, which is why the observation is needed. Fails when
either stops being true.

Each signal is sent to this process while a handler that keeps it from stopping the test run
is installed: the test's own, which only notes it, or Dagster's, inside the run."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.adapters.interrupts import observing


@contextmanager
def _ignored(signum: int) -> Iterator[list[int]]:
    """A handler for `signum` that only notes it (as Dagster's own, during a run, does not raise)."""
    got: list[int] = []
    before = signal.signal(signum, lambda s, _frame: got.append(s))
    try:
        yield got
    finally:
        signal.signal(signum, before)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_is_observed_beside_the_handler_that_runs(signum: int) -> None:
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    with _ignored(signum) as got, observing() as seen:
        assert not seen.stopped()
        os.kill(os.getpid(), signum)
        assert got == [signum]  # the handler ran: nothing was replaced
        assert seen.stopped()
    assert signal.set_wakeup_fd(before) == before  # the wakeup socket before the block is back


def test_other_signals_are_not_a_stop() -> None:
    with _ignored(signal.SIGUSR1) as got, observing() as seen:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert got == [signal.SIGUSR1]
        assert not seen.stopped()


def test_off_the_main_thread_nothing_is_observed() -> None:
    results: list[bool] = []

    def observe() -> None:
        with observing() as seen:
            results.append(seen.stopped())

    thread = threading.Thread(target=observe)
    thread.start()
    thread.join()
    assert results == [False]


def test_dagster_turns_a_ctrl_c_into_a_failed_run_that_raises_nothing(tmp_path: Path) -> None:
    """The reason for the module: were this to raise, the runner could catch it instead."""

    @dg.op
    def interrupted() -> None:
        os.kill(os.getpid(), signal.SIGINT)

    @dg.op(ins={"start": dg.In(dg.Nothing)})
    def after() -> None: ...

    @dg.job
    def job() -> None:
        after(start=interrupted())

    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance, observing() as seen:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        assert seen.stopped()
    assert not result.success
    assert instance.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.FAILURE
    # The step it landed in failed; the one after it never ran.
    assert [e.step_key for e in result.get_step_failure_events()] == ["interrupted"]
    assert not result.get_step_success_events()
