"""SQL that differs between SQLite and Postgres: upsert and insert-or-ignore, plus the
chunking of long `IN (...)` lists. Used by every repository of the state store."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from sqlalchemy import Connection, Select, Table, func

CHUNK = 500  # rows per statement where a list goes into an IN (...)


def chunks(items: Collection[str]) -> Iterator[list[str]]:
    seq = list(items)
    for i in range(0, len(seq), CHUNK):
        yield seq[i : i + CHUNK]


# One statement with many parameter sets (executemany), compiled once: a multi-row VALUES
# clause is compiled anew for every batch.


def upsert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]], keys: list[str]) -> None:
    """Insert rows; a row whose `keys` exist replaces the stored row's other columns."""
    if rows:
        stmt = _dialect(conn).insert(table)
        cols = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
        conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=cols), rows)


def upsert_select(
    conn: Connection,
    table: Table,
    names: list[str],
    query: Select,
    keys: list[str],
    *,
    keep_stored: Collection[str] = (),
) -> None:
    """Insert the rows `query` selects (its columns are `names`), in one statement; a row whose
    `keys` exist replaces the stored row's other columns, but a NULL in `keep_stored` keeps
    the stored value."""
    stmt = _dialect(conn).insert(table).from_select(names, query)
    cols = {
        c: func.coalesce(stmt.excluded[c], table.c[c]) if c in keep_stored else stmt.excluded[c]
        for c in names
        if c not in keys
    }
    conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=cols))


def insert_ignore_rows(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert rows; a row whose key exists is left as it is (the first write stands)."""
    if rows:
        conn.execute(_dialect(conn).insert(table).on_conflict_do_nothing(), rows)


def _dialect(conn: Connection) -> Any:
    # Imported at first use: the PostgreSQL dialect (its catalog alone is 377 columns) is a
    # seventh of a second that `status` and `search` on SQLite state would pay for nothing.
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql
    from sqlalchemy.dialects import sqlite

    return sqlite
