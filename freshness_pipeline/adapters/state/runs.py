"""Committed runs (`runs`) and what they changed, read back from their change events; each
source's last attempt (`last_attempts`), committed or not; every refresh run's own record
(`run_outcomes`): what its steps wrote of it, and the holder of a run a `freshness run`
executed under its source's run lock."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, delete, func, select, update

from . import schema


class RunLog:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def recent(self, source: str, limit: int = 20) -> list[dict[str, Any]]:
        """The latest committed runs of a source, newest first."""
        t = schema.runs
        with self.engine.connect() as conn:
            q = select(t).where(t.c.source == source).order_by(t.c.id.desc()).limit(limit)
            return [r._asdict() for r in conn.execute(q)]

    def reembed_counts(self, source: str, since: float) -> dict[str, int]:
        """Per page, how many runs since `since` re-embedded or rewrote some of its sections
        (its "changed" change events: one per page per run)."""
        t = schema.change_events
        q = (
            select(t.c.url, func.count())
            .where(t.c.source == source, t.c.kind == "changed", t.c.created_at >= since)
            .group_by(t.c.url)
        )
        with self.engine.connect() as conn:
            return {url: int(n) for url, n in conn.execute(q)}

    def record_attempt(self, source: str, attempt: dict[str, Any]) -> None:
        """Keep `attempt` (run_id, finished_at, status, message) as the source's last."""
        t = schema.last_attempts
        with self.engine.begin() as conn:
            conn.execute(delete(t).where(t.c.source == source))
            conn.execute(t.insert(), [{**attempt, "source": source}])

    def last_attempt(self, source: str) -> dict[str, Any] | None:
        t = schema.last_attempts
        with self.engine.connect() as conn:
            row = conn.execute(select(t).where(t.c.source == source)).first()
        return None if row is None else {k: v for k, v in row._asdict().items() if k != "source"}

    def committed(self, source: str, run_id: str) -> dict[str, Any] | None:
        """The commit that Dagster run `run_id` made for `source`, if it made one."""
        t = schema.runs
        with self.engine.connect() as conn:
            row = conn.execute(select(t).where(t.c.source == source, t.c.run_id == run_id)).first()
        return None if row is None else row._asdict()

    def record_local(self, run_id: str, source: str, started_at: float, holder: str) -> None:
        """Run `run_id` of `source` is executed by `holder`, which holds the source's run lock."""
        self.update_run(run_id, source, {"holder": holder}, started_at=started_at)

    def update_run(
        self,
        run_id: str,
        source: str,
        columns: dict[str, Any] | None = None,
        *,
        facts: dict[str, Any] | None = None,
        append: dict[str, list[Any]] | None = None,
        drop: dict[str, Any] | None = None,
        started_at: float,
    ) -> None:
        """Merge into run `run_id`'s record (made, started at `started_at`, if it has none):
        `columns` set, `facts` keys set, `append` lists extended, `drop` values taken out of
        their lists; read and written in one transaction."""
        t = schema.run_outcomes
        with self.engine.begin() as conn:
            row = conn.execute(select(t.c.facts).where(t.c.run_id == run_id)).first()
            merged = dict((row.facts if row is not None else None) or {}) | (facts or {})
            for key, more in (append or {}).items():
                merged[key] = [*merged.get(key, []), *more]
            for key, value in (drop or {}).items():
                merged[key] = [v for v in merged.get(key, []) if v != value]
            values = {**(columns or {}), "facts": merged}
            if row is None:
                conn.execute(t.insert(), [{"run_id": run_id, "source": source, "started_at": started_at, **values}])
            else:
                conn.execute(update(t).where(t.c.run_id == run_id).values(**values))

    def run_record(self, run_id: str) -> dict[str, Any] | None:
        """Run `run_id`'s record (its columns; `facts` a dict), or None."""
        t = schema.run_outcomes
        with self.engine.connect() as conn:
            row = conn.execute(select(t).where(t.c.run_id == run_id)).first()
        return None if row is None else {**row._asdict(), "facts": row.facts or {}}

    def run_records(self, source: str, limit: int = 20) -> list[dict[str, Any]]:
        """The latest records of `source`'s runs, newest first."""
        t = schema.run_outcomes
        q = select(t).where(t.c.source == source).order_by(t.c.started_at.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [{**r._asdict(), "facts": r.facts or {}} for r in conn.execute(q)]

    def local_holders(self, source: str, run_ids: list[str]) -> dict[str, str]:
        """Of `run_ids`, those a `freshness run` executed for `source`, with their holder."""
        t = schema.run_outcomes
        q = select(t.c.run_id, t.c.holder).where(t.c.source == source, t.c.run_id.in_(run_ids), t.c.holder.is_not(None))
        with self.engine.connect() as conn:
            return {run_id: holder for run_id, holder in conn.execute(q)}
