"""What the plan stage stages: one row per record the plan names, with its action
(`staged_plan`), the change events (`staged_events`) and the key redirects
(`staged_redirects`), all read by the index stage's commit."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, Row, Select, select

from ....core.models import Action, Section
from ....core.state import ChangeEvent
from .. import schema
from ..dialect import chunks
from .rows import BATCH, write_rows
from .sections import section_columns, section_from_row


@dataclass(frozen=True, slots=True)
class PlanRow:
    id: str
    action: Action
    url: str
    as_of: str | None = None
    old_id: str | None = None  # a moved section's record before the move
    old_url: str | None = None


def _values(actions: Collection[Action]) -> list[str]:
    return [a.value for a in actions]


class PlanStaging:
    """The plan stage's staged work (`StateStore.plan_staging`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add_rows(self, source: str, run_id: str, rows: Iterable[PlanRow]) -> None:
        dicts = (
            {
                "source": source,
                "run_id": run_id,
                "id": r.id,
                "action": r.action.value,
                "url": r.url,
                "as_of": r.as_of,
                "old_id": r.old_id,
                "old_url": r.old_url,
            }
            for r in rows
        )
        write_rows(self.engine, schema.staged_plan, dicts)

    def add_events(self, source: str, run_id: str, events: Iterable[ChangeEvent]) -> None:
        rows = (
            {
                "source": source,
                "run_id": run_id,
                "url": e.url,
                "kind": e.kind,
                "content_hash": e.content_hash,
                "section_keys": list(e.section_keys),
            }
            for e in events
        )
        write_rows(self.engine, schema.staged_events, rows)

    def add_redirects(self, source: str, run_id: str, redirects: Iterable[tuple[str, str]]) -> None:
        rows = ({"source": source, "run_id": run_id, "old_key": o, "new_key": n} for o, n in redirects)
        write_rows(self.engine, schema.staged_redirects, rows)

    def rows(
        self, source: str, run_id: str, actions: Collection[Action]
    ) -> Iterator[list[tuple[PlanRow, Section | None]]]:
        """The plan's rows with these actions in batches (by id), each with its staged
        section dated as the plan found it (None for a removed record)."""
        p, s = schema.staged_plan, schema.staged_sections
        joined = p.outerjoin(s, (s.c.source == p.c.source) & (s.c.run_id == p.c.run_id) & (s.c.id == p.c.id))
        cols = [
            p.c.id,
            p.c.action,
            p.c.url,
            p.c.as_of,
            p.c.old_id,
            p.c.old_url,
            s.c.id.label("s_id"),
            *section_columns(s),
        ]
        q = (
            select(*cols)
            .select_from(joined)
            .where(p.c.source == source, p.c.run_id == run_id, p.c.action.in_(_values(actions)))
        )
        for rows in self._by_id(q):
            yield [
                (
                    PlanRow(r[0], Action(r[1]), *r[2:6]),
                    None if r[6] is None else section_from_row(r[7:], as_of=r[3]),  # dated as planned
                )
                for r in rows
            ]

    def ids(self, source: str, run_id: str, actions: Collection[Action], *, old: bool = True) -> Iterator[list[str]]:
        """The record ids the plan's rows with these actions name (and with `old` a moved
        record's old id), in batches, without reading the sections."""
        p = schema.staged_plan
        q = select(p.c.id, p.c.old_id).where(
            p.c.source == source, p.c.run_id == run_id, p.c.action.in_(_values(actions))
        )
        for rows in self._by_id(q):
            yield [i for r in rows for i in (r.id, r.old_id if old else None) if i is not None]

    def named(
        self, source: str, run_id: str, ids: Collection[str], actions: Collection[Action], *, old: bool = True
    ) -> set[str]:
        """Which of `ids` the plan's rows with these actions name (and with `old` a moved
        record's old id)."""
        p = schema.staged_plan
        out: set[str] = set()
        with self.engine.connect() as conn:
            for part in chunks(ids):
                for col in (p.c.id, p.c.old_id) if old else (p.c.id,):
                    q = select(col).where(
                        p.c.source == source, p.c.run_id == run_id, p.c.action.in_(_values(actions)), col.in_(part)
                    )
                    out.update(conn.execute(q).scalars())
        return out

    def events(self, source: str, run_id: str) -> Iterator[ChangeEvent]:
        """The staged change events: pages in URL order, then the gone ones."""
        t = schema.staged_events
        q = select(t).where(t.c.source == source, t.c.run_id == run_id).order_by(t.c.kind == "gone", t.c.url)
        with self.engine.connect() as conn:
            for r in conn.execute(q):
                yield ChangeEvent(r.url, r.kind, r.content_hash, tuple(r.section_keys))

    def redirects(self, source: str, run_id: str) -> list[tuple[str, str]]:
        t = schema.staged_redirects
        q = select(t.c.old_key, t.c.new_key).where(t.c.source == source, t.c.run_id == run_id).order_by(t.c.old_key)
        with self.engine.connect() as conn:
            return [(r.old_key, r.new_key) for r in conn.execute(q)]

    def _by_id(self, q: Select) -> Iterator[Sequence[Row]]:
        """The plan rows `q` selects, `BATCH` at a time in id order (keyset pages)."""
        p, last = schema.staged_plan, ""
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(q.where(p.c.id > last).order_by(p.c.id).limit(BATCH)).all()
            if not rows:
                return
            yield rows
            last = rows[-1].id
