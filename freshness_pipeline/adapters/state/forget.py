"""A retired source forgotten: every row the state store keeps for it, in one transaction.

Every table with a `source` column is a source's (`schema.py`); the embedding cache is keyed
by text and model, not by source, and is shared, so it stays (`vector_cache.py` prunes it)."""

from __future__ import annotations

from sqlalchemy import Engine, select

from . import schema


def source_names(engine: Engine) -> list[str]:
    """Every source the state store holds rows of: those that committed an index (`sources`)
    and those that only attempted runs (`last_attempts`), sorted."""
    with engine.connect() as conn:
        q = select(schema.sources.c.source).union(select(schema.last_attempts.c.source))
        return sorted(conn.execute(q).scalars())


def forget_source(engine: Engine, source: str) -> int:
    """Delete every row of `source`; how many were deleted."""
    deleted = 0
    with engine.begin() as conn:
        for t in reversed(schema.metadata.sorted_tables):
            if "source" in t.c:
                deleted += conn.execute(t.delete().where(t.c.source == source)).rowcount
    return deleted
