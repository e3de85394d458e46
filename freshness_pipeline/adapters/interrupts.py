"""Whether a Ctrl-C or a SIGTERM reached this process while a block ran, whatever handler
Python ran for it (docs/decisions/0005-a-ctrl-c-is-observed-not-handled.md).

`execute_in_process` turns either signal into a failed step and run, and no public Dagster
API says that the run failed because of it. Python's `signal.set_wakeup_fd` writes each
signal's number to a socket as it arrives, beside whatever handler runs: no handler is
replaced and nothing is sent to any process.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager

STOPS = frozenset({signal.SIGINT, signal.SIGTERM})


class Observed:
    """The signals `observing` saw, read from its wakeup socket."""

    def __init__(self, reader: socket.socket | None) -> None:
        self._reader = reader
        self._signals: set[int] = set()

    def stopped(self) -> bool:
        """Whether a SIGINT or a SIGTERM reached the process since the block began."""
        try:
            while self._reader is not None and (chunk := self._reader.recv(256)):
                self._signals |= set(chunk)
        except BlockingIOError:
            pass
        return bool(self._signals & STOPS)


@contextmanager
def observing() -> Iterator[Observed]:
    """The signals that reach the process in the block. Off the main thread, where Python
    allows no wakeup socket, none are seen."""
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        try:
            before = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            yield Observed(None)
            return
        try:
            yield Observed(reader)
        finally:
            signal.set_wakeup_fd(before)
    finally:
        reader.close()
        writer.close()
