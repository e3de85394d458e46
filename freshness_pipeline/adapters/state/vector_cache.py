"""The embedding cache: vectors keyed by model, dimensions and content hash, so a text is
paid for once (a crashed run's vectors are taken from here by the next)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping

import numpy as np
from sqlalchemy import Engine, select

from . import schema
from .dialect import chunks, insert_ignore_rows


class VectorCache:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, model: str, dims: int, hashes: Collection[str]) -> dict[str, np.ndarray]:
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
