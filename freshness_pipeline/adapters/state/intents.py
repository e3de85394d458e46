"""Write-ahead intents (`pending_writes`): the record ids a run is about to write to the
vector store, recorded before it writes them. The commit clears them; after a crash the next
run deletes those the manifest does not know."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Engine, select

from . import schema
from .dialect import insert_ignore_rows


class Intents:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(self, source: str, namespace: str, ids: Iterable[str]) -> None:
        rows = [{"source": source, "namespace": namespace, "id": i} for i in ids]
        if rows:
            with self.engine.begin() as conn:
                insert_ignore_rows(conn, schema.pending_writes, rows)

    def pending(self, source: str) -> dict[str, set[str]]:
        """Namespace -> ids written (or about to be) since the last commit."""
        t = schema.pending_writes
        out: dict[str, set[str]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(select(t.c.namespace, t.c.id).where(t.c.source == source)):
                out.setdefault(r.namespace, set()).add(r.id)
        return out
