"""The SQLAlchemy engine of the state store. SQLite: WAL and a busy timeout for writers;
for readers a read-only (or, in a folder nobody can write, immutable) open that changes
nothing on disk. A damaged or unwritable SQLite file becomes one `DamagedState` line."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.pool import QueuePool

from ..damage import DamagedState


def make_engine(url: str, *, read_only: bool) -> Engine:
    parsed = make_url(url)
    sqlite_file = parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")
    if sqlite_file and read_only:
        path = Path(parsed.database or "")
        # Read-only needs a -shm file it may create; in a folder nobody can write and with
        # no WAL left to read, the file cannot change: open it immutable.
        wal = Path(f"{path}-wal").exists()
        flag = "mode=ro" if wal or os.access(path.parent, os.W_OK) else "immutable=1"
        uri = f"file:{quote(str(path.resolve()))}?{flag}"  # quoted: a path may hold ? or #
        connect = lambda: sqlite3.connect(uri, uri=True, check_same_thread=False)  # noqa: E731
        engine = create_engine("sqlite://", creator=connect, poolclass=QueuePool)
    else:
        engine = create_engine(url, future=True)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_read_pragmas if read_only else _sqlite_pragmas)
        event.listen(engine, "handle_error", _sqlite_damage(Path(parsed.database or "")))
    return engine


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_read_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


_CORRUPT = ("malformed", "not a database", "file is encrypted", "disk i/o error")
_UNWRITABLE = ("readonly database", "read-only", "unable to open database file")


def _sqlite_damage(path: Path) -> Any:
    """A `handle_error` hook: a damaged or unwritable SQLite file becomes one `DamagedState`
    line naming the file, what is wrong and the way out."""

    def hook(ctx: ExceptionContext) -> None:
        reason = str(ctx.original_exception)
        low = reason.lower()
        if any(m in low for m in _CORRUPT):
            raise DamagedState(
                f"{path} is damaged ({reason}): restore it from a backup, or move it aside "
                f"(mv {path} {path}.damaged) and `freshness run` rebuilds it from the site "
                "(every section is embedded again), then `freshness reconcile --fix`"
            ) from None
        if any(m in low for m in _UNWRITABLE):
            raise DamagedState(unwritable(path, reason)) from None

    return hook


def unwritable(path: Path, reason: str) -> str:
    return (
        f"{path}: cannot write the state ({reason}): make {path.parent} writable for this user, "
        "or run the command as its owner (status, search and dump only read)"
    )
