"""What the staging repositories share: the batch size and the batched insert."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Any

from sqlalchemy import Engine, Table

BATCH = 1000  # rows per read and per write


def write_rows(engine: Engine, table: Table, rows: Iterable[dict[str, Any]]) -> int:
    """Insert `rows` `BATCH` at a time, each batch its own transaction; returns how many."""
    it, written = iter(rows), 0
    while part := list(islice(it, BATCH)):
        with engine.begin() as conn:
            conn.execute(table.insert(), part)
        written += len(part)
    return written
