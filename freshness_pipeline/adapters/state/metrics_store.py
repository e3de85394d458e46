"""The metrics side of the state store: the freshness time series, golden-set miss
counters, re-index requests, weak queries, cited keys and webhook delivery cursors.

Same database and engine as the other repositories of `StateStore` (tables from migration 0002).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, delete, func, select

from ...core.freshness import next_streak
from . import schema
from .dialect import insert_ignore_rows, upsert_rows

WEAK_QUERY_DAYS = 90  # weak queries are kept this long
CITED_KEY_DAYS = 30  # the citation resolution rate looks back this far
_DAY = 86_400.0


class MetricsStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- the time series -----------------------------------------------------------------

    def add_metrics(self, row: Mapping[str, Any]) -> None:
        with self.engine.begin() as conn:
            conn.execute(schema.freshness_metrics.insert(), [dict(row)])

    def history(self, source: str, limit: int | None = 20) -> list[dict[str, Any]]:
        """The latest `limit` (None: every) measurements of a source, oldest first, every column of the table."""
        t = schema.freshness_metrics
        q = select(t).where(t.c.source == source).order_by(t.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [r._asdict() for r in conn.execute(q)][::-1]

    # -- golden-set miss counters ---------------------------------------------------------

    def count_misses(self, source: str, kind: str, outcomes: Mapping[str, bool]) -> dict[str, int]:
        """Record one run's outcome per subject (True: missed); returns the consecutive
        misses of each subject after this run."""
        t = schema.golden_misses
        now = time.time()
        with self.engine.begin() as conn:
            q = select(t).where(t.c.source == source, t.c.kind == kind)
            prev = {r.subject: r for r in conn.execute(q)}
            rows = []
            streaks: dict[str, int] = {}
            for subject, missed in outcomes.items():
                old = prev.get(subject)
                consecutive = streaks[subject] = next_streak(old.consecutive if old else 0, missed)
                rows.append(
                    {
                        "source": source,
                        "kind": kind,
                        "subject": subject,
                        "consecutive": consecutive,
                        "total": (old.total if old else 0) + int(missed),
                        "runs": (old.runs if old else 0) + 1,
                        "updated_at": now,
                    }
                )
            if rows:
                upsert_rows(conn, t, rows, ["source", "kind", "subject"])
            # Subjects no longer in the golden set stop counting.
            gone = set(prev) - set(outcomes)
            if gone:
                conn.execute(delete(t).where(t.c.source == source, t.c.kind == kind, t.c.subject.in_(gone)))
        return streaks

    def chronic_misses(self, source: str, at_least: int) -> list[dict[str, Any]]:
        """Queries and sections missing on at least `at_least` consecutive runs."""
        t = schema.golden_misses
        q = (
            select(t.c.kind, t.c.subject, t.c.consecutive, t.c.total, t.c.runs)
            .where(t.c.source == source, t.c.consecutive >= at_least)
            .order_by(t.c.kind, t.c.consecutive.desc(), t.c.subject)
        )
        with self.engine.connect() as conn:
            return [r._asdict() for r in conn.execute(q)]

    # -- re-index requests ----------------------------------------------------------------

    def request_reindex(self, source: str, reason: str, from_version: int) -> None:
        row = {"source": source, "reason": reason, "from_version": from_version, "requested_at": time.time()}
        with self.engine.begin() as conn:
            insert_ignore_rows(conn, schema.reindex_requests, [row])  # the first reason stands

    def pending_reindex(self, source: str) -> dict[str, Any] | None:
        t = schema.reindex_requests
        with self.engine.connect() as conn:
            row = conn.execute(select(t).where(t.c.source == source)).first()
        return row._asdict() if row else None

    def settle_reindex(self, source: str, active_version: int) -> bool:
        """Drop the request once the active index version has moved past the one it was
        made against (a full re-index has landed). Returns whether one was dropped."""
        t = schema.reindex_requests
        with self.engine.begin() as conn:
            done = conn.execute(delete(t).where(t.c.source == source, t.c.from_version < active_version))
        return bool(done.rowcount)

    # -- searches: weak queries and cited keys --------------------------------------------

    def record_search(
        self,
        *,
        weak: Mapping[str, Any] | None,
        cited: Sequence[tuple[str, str]],
        now: float | None = None,
    ) -> None:
        """A weak query ({query, model, best_score, best_url, source}) and the (source, key) pairs a
        search returned; purges rows past their retention in the same transaction."""
        now = time.time() if now is None else now
        wq, ck = schema.weak_queries, schema.cited_keys
        with self.engine.begin() as conn:
            if weak is not None:
                conn.execute(wq.insert(), [{**weak, "created_at": now}])
            if cited:
                conn.execute(ck.insert(), [{"source": s, "key": k, "created_at": now} for s, k in cited])
            conn.execute(delete(wq).where(wq.c.created_at < now - WEAK_QUERY_DAYS * _DAY))
            conn.execute(delete(ck).where(ck.c.created_at < now - CITED_KEY_DAYS * _DAY))

    def weak_queries(self, *, days: float = WEAK_QUERY_DAYS, limit: int = 100) -> list[dict[str, Any]]:
        """The weak queries of the last `days`, newest first."""
        t = schema.weak_queries
        q = (
            select(t.c.source, t.c.created_at, t.c.best_score, t.c.query, t.c.best_url, t.c.model)
            .where(t.c.created_at >= time.time() - days * _DAY)
            .order_by(t.c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [r._asdict() for r in conn.execute(q)]

    def cited_keys(self, source: str, *, days: float = CITED_KEY_DAYS) -> list[str]:
        """Distinct keys searches returned for `source` in the last `days`."""
        t = schema.cited_keys
        q = select(t.c.key).where(t.c.source == source, t.c.created_at >= time.time() - days * _DAY).group_by(t.c.key)
        with self.engine.connect() as conn:
            return list(conn.execute(q).scalars())

    # -- change-event delivery ------------------------------------------------------------

    def events_after(self, last_id: int, limit: int = 500) -> list[dict[str, Any]]:
        t = schema.change_events
        q = select(t).where(t.c.id > last_id).order_by(t.c.id).limit(limit)
        with self.engine.connect() as conn:
            return [r._asdict() for r in conn.execute(q)]

    def cursor(self, url: str) -> dict[str, Any]:
        t = schema.webhook_cursors
        with self.engine.connect() as conn:
            row = conn.execute(select(t).where(t.c.url == url)).first()
        return row._asdict() if row else {"url": url, "last_event_id": 0, "attempts": 0, "last_error": None}

    def advance(self, url: str, event_id: int) -> None:
        """Only ever called after the receiver answered 2xx for `event_id`."""
        self._save_cursor({"url": url, "last_event_id": event_id, "attempts": 0, "last_error": None})

    def failed(self, url: str, error: str) -> None:
        cur = self.cursor(url)
        self._save_cursor({**cur, "attempts": cur["attempts"] + 1, "last_error": error[:1000]})

    def backlog(self, url: str) -> int:
        t = schema.change_events
        last = self.cursor(url)["last_event_id"]
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(t).where(t.c.id > last)).scalar_one())

    def _save_cursor(self, row: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            upsert_rows(conn, schema.webhook_cursors, [{**row, "updated_at": time.time()}], ["url"])
