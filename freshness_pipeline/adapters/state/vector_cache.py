"""The embedding cache: vectors keyed by model, dimensions and content hash, so a text is
paid for once (a crashed run's vectors are taken from here by the next).

Bounded by `prune` (`freshness reconcile --fix`): a row stays while a committed section of a
source whose active index uses its model references it (search and `reconcile --fix`
rebuild from those), or while any run's staged sections do (a running refresh, a blue/green
candidate being built, a crashed run the next one resumes); every other row goes. Not at
every commit: a replaced text that comes back (a reverted edit) is then still free.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, and_, delete, exists, func, select

from . import schema
from .dialect import chunks, insert_ignore_rows

if TYPE_CHECKING:
    import numpy as np


class VectorCache:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, model: str, dims: int, hashes: Collection[str]) -> dict[str, np.ndarray]:
        import numpy as np  # on first use: `status` and a launched run's caller open the store, not vectors

        t = schema.embedding_cache
        out: dict[str, np.ndarray] = {}
        with self.engine.connect() as conn:
            for part in chunks(set(hashes)):
                q = select(t.c.content_hash, t.c.vector).where(
                    t.c.model == model, t.c.dims == dims, t.c.content_hash.in_(part)
                )
                for r in conn.execute(q):
                    out[r.content_hash] = np.frombuffer(r.vector, dtype="<f4")
        return out

    def put(self, model: str, dims: int, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors; the first one stored for a text stands (same text, same vector)."""
        import numpy as np

        now = time.time()
        rows = [
            {
                "model": model,
                "dims": dims,
                "content_hash": h,
                "vector": np.asarray(v, dtype="<f4").tobytes(),
                "created_at": now,
            }
            for h, v in vectors.items()
        ]
        if rows:
            with self.engine.begin() as conn:
                insert_ignore_rows(conn, schema.embedding_cache, rows)

    def prune(self) -> int:
        """Delete the rows nothing references; returns how many went."""
        with self.engine.begin() as conn:
            return prune_unreferenced(conn)

    def size(self) -> int:
        """Rows in the cache, every model's."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(schema.embedding_cache)).scalar_one())


def prune_unreferenced(conn: Connection) -> int:
    """Delete the rows nothing references (module docstring) in the transaction `conn`;
    returns how many went."""
    c, s, src, st = schema.embedding_cache, schema.sections, schema.sources, schema.staged_sections
    committed = (
        select(s.c.content_hash)
        .select_from(s.join(src, s.c.source == src.c.source))
        .where(and_(s.c.content_hash == c.c.content_hash, src.c.embed_model == c.c.model, src.c.embed_dims == c.c.dims))
    )
    staged = select(st.c.content_hash).where(st.c.content_hash == c.c.content_hash)
    return int(conn.execute(delete(c).where(~exists(committed), ~exists(staged))).rowcount or 0)
