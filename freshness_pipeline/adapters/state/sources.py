"""The `sources` table: per source, the versions of its active index and its generation."""

from __future__ import annotations

import time
from dataclasses import asdict

from sqlalchemy import Connection, Engine, select

from ...core.state import SourceState
from . import schema
from .dialect import upsert_rows


class Sources:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, source: str) -> SourceState | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.sources).where(schema.sources.c.source == source)).first()
        return SourceState(**row._asdict()) if row else None

    def save(self, state: SourceState) -> None:
        with self.engine.begin() as conn:
            save_source(conn, state)

    def names(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(schema.sources.c.source)).scalars())


def save_source(conn: Connection, state: SourceState) -> None:
    """Upsert a source's row inside the caller's transaction (stamps `updated_at`)."""
    state.updated_at = time.time()
    upsert_rows(conn, schema.sources, [asdict(state)], ["source"])


def generation(conn: Connection, source: str) -> int:
    """The source's manifest generation as this transaction sees it (0: never committed)."""
    q = select(schema.sources.c.generation).where(schema.sources.c.source == source)
    return int(conn.execute(q).scalar() or 0)
