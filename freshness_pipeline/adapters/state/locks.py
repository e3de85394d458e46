"""The per-source lock: one run per source at a time, released even when the process dies."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from ..damage import DamagedState
from .engine import unwritable

RETRY_S = 0.2  # between two tries of a busy advisory lock


class SourceBusy(RuntimeError):
    """Another run holds the source's lock."""


class Locks:
    """Postgres: a session advisory lock (dies with the connection). SQLite: a lock on a
    file beside the database (`filelock`: flock where there is one; dies with the process)."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url  # a read-only SQLite engine has no path of its own

    @contextmanager
    def lock(self, source: str, *, wait: bool | float = False) -> Iterator[None]:
        """Exclusive lock on `source` (any name); `SourceBusy` when another process holds it,
        at once, or after `wait` seconds (a number), never with `wait=True`. The kernel (a
        file lock) or the database (an advisory lock of a session) frees a lock whose
        holder died, at once."""
        timeout = -1.0 if wait is True else float(wait)
        if self.engine.dialect.name == "sqlite":
            with self._file_lock(source, timeout=timeout):
                yield
        else:
            with self._advisory_lock(source, timeout=timeout):
                yield

    @contextmanager
    def _file_lock(self, source: str, *, timeout: float) -> Iterator[None]:
        path = Path(f"{make_url(self.url).database}.{source}.lock")
        lock = FileLock(path, timeout=timeout)
        try:
            lock.acquire()
        except Timeout:
            raise SourceBusy(_busy(source)) from None
        except OSError as exc:
            raise DamagedState(unwritable(path, exc.strerror or str(exc))) from None
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def _advisory_lock(self, source: str, *, timeout: float) -> Iterator[None]:
        lock_id = int.from_bytes(hashlib.sha1(source.encode()).digest()[:8], "big", signed=True)
        deadline = time.monotonic() + timeout
        with self.engine.connect() as conn:
            if timeout < 0:
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": lock_id})
            else:
                while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_id}).scalar():
                    if time.monotonic() >= deadline:
                        raise SourceBusy(_busy(source))
                    time.sleep(min(RETRY_S, max(0.0, deadline - time.monotonic())))
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_id})
                conn.commit()


def _busy(source: str) -> str:
    return f"source {source!r} is being refreshed by another run; try again when it finishes"
