"""The SQLAlchemy engine of the state store. SQLite: WAL and a busy timeout for writers;
for readers a read-only (or, in a folder nobody can write, immutable) open that changes
nothing on disk. A damaged or unwritable SQLite file becomes one `DamagedState` line."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import QueuePool

from ..damage import DamagedState, StateUnreachable

WHERE = "$FRESHNESS_STATE_URL, else the sources file's `state_url`"


def parse_url(url: str) -> URL:
    """The state database's URL, or one `StateUnreachable` line when it does not parse."""
    try:
        return make_url(url)
    except ArgumentError:
        raise StateUnreachable(
            f"the state database URL {_redacted(url)!r} ({WHERE}) is not a database URL: "
            "e.g. postgresql+psycopg2://user@host:5432/db or sqlite:////path/to/freshness.db"
        ) from None


def make_engine(url: str, *, read_only: bool) -> Engine:
    parsed = parse_url(url)
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
        engine = _server_engine(url, parsed)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_read_pragmas if read_only else _sqlite_pragmas)
        event.listen(engine, "handle_error", _sqlite_damage(Path(parsed.database or "")))
    else:
        event.listen(engine, "handle_error", _server_unreachable(url))
    return engine


def _server_engine(url: str, parsed: URL) -> Engine:
    """A database server's engine; a URL whose password holds an unescaped `@`, that names
    no database, or needs a driver this install lacks (a bare `postgresql://` is psycopg 3),
    is one `StateUnreachable` line."""
    shown = _redacted(url)
    if url.partition("//")[2].partition("/")[0].count("@") > 1:  # the rest would be read as the host
        raise StateUnreachable(f"the state database URL {shown} ({WHERE}) has an @ in its password: write it %40")
    if not parsed.database:  # the login's default database, which others share (Dagster's `runs`)
        raise StateUnreachable(f"the state database URL {shown} ({WHERE}) names no database: name one of its own")
    try:
        return create_engine(url, future=True)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise StateUnreachable(
            f"the state database URL {shown} ({WHERE}) needs a driver this install lacks ({exc}); "
            "for PostgreSQL write postgresql+psycopg2://"
        ) from None


def _redacted(url: str) -> str:
    """The URL with any password masked, up to the host's `@` however many the password
    holds unescaped (it may not parse, so not through SQLAlchemy)."""
    return re.sub(r"(//[^/@:]*:)[^/]*@", r"\1***@", url)


def _server_unreachable(url: str) -> Any:
    """A `handle_error` hook: a server that refuses the first connection (down, wrong host,
    port, user or database) becomes one `StateUnreachable` line naming the URL."""

    def hook(ctx: ExceptionContext) -> None:
        if ctx.connection is None and ctx.is_disconnect is False and ctx.original_exception is not None:
            reason = str(ctx.original_exception).strip().splitlines()[0]
            raise StateUnreachable(
                f"cannot connect to the state database {_redacted(url)} ({WHERE}): {reason}"
            ) from None

    return hook


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
