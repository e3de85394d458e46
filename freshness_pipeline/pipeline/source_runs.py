"""One `freshness run` of a source at a time on this state store, and a way to tell its dead
runs from its live ones without supervising any process.

`holding_source` takes the source's run lock (`adapters/state/locks.py`: a file lock on
SQLite, a session's advisory lock on PostgreSQL, either freed at once when its holder dies),
waiting at most `runs.source_wait_s` for another `freshness run` of the source, and holds
it while the run executes. Each run it executes is recorded (`RunLog.record_local`) before
it starts. So once the lock is ours, any run of the source recorded so and still in flight
lost its process: nothing else can be executing it."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from ..adapters.state.locks import SourceBusy
from ..adapters.state.store import StateStore, migrate
from ..config import Settings, state_url
from .errors import SourceWaitExpired


def run_lock_name(source: str) -> str:
    """The run lock's name: no source's name holds a dot, so it is never a stage's lock."""
    return f"{source}.run"


@dataclass(frozen=True)
class SourceHold:
    """The source's run lock, held: what the holder may ask the state store."""

    store: StateStore
    source: str

    def executing(self, run_id: str) -> None:
        """Record that this process executes `run_id` under the lock."""
        self.store.runs.record_local(run_id, self.source, time.time(), f"{socket.gethostname()} pid {os.getpid()}")

    def dead(self, in_flight: list[str]) -> dict[str, str]:
        """Of the source's runs `in_flight` in Dagster, those a `freshness run` executed, with
        the process that did: with the lock ours, that process is gone."""
        return self.store.runs.local_holders(self.source, in_flight) if in_flight else {}


@contextmanager
def holding_source(settings: Settings, source: str) -> Iterator[SourceHold]:
    """The source's run lock for the block, after at most `settings.runs.source_wait_s` of
    waiting for another run of it (said once on stderr); `SourceWaitExpired` after that."""
    url = state_url(settings)
    migrate(url)
    store = StateStore(url)
    wait_s = settings.runs.source_wait_s
    with ExitStack() as stack:
        stack.callback(store.close)
        try:
            stack.enter_context(store.locks.lock(run_lock_name(source)))
        except SourceBusy:
            print(
                f"{source}: waiting for another `freshness run` of it to end, at most {wait_s:g} s "
                "(runs.source_wait_s)",
                file=sys.stderr,
                flush=True,
            )
            try:
                stack.enter_context(store.locks.lock(run_lock_name(source), wait=wait_s))
            except SourceBusy:
                raise SourceWaitExpired(
                    f"{source}: another `freshness run` of it was still running after {wait_s:g} s "
                    "(runs.source_wait_s); try again when it ends"
                ) from None
        yield SourceHold(store, source)
