"""A refresh's work between its stages, in the state database (the `staged_*` tables).

Each stage writes what the next one needs in batches, under the source and the id of the
run that staged it, and the next stage reads it back in batches: no stage's bulk output
travels through Dagster, and a step in another process (the Celery executor) reads the
same rows. A run's staging is dropped by its manifest commit, and every other run's by the
start of a later run (`begin`): a killed run's staging never reaches a later run's plan.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from sqlalchemy import Connection, Engine, Row, Select, Table, delete, exists, select, update

from ...core.models import Section
from ...core.state import ChangeEvent, PageRow
from . import schema
from .dialect import chunks, insert_ignore_rows, upsert_rows, upsert_select
from .pages import split_by_text
from .section_rows import _unsigned, section_fields

BATCH = 1000  # rows per read and per write
STAGES = ("crawl", "sections", "plan")  # the columns of `staged_runs`, in run order
_TABLES: tuple[Table, ...] = (
    schema.staged_extracts,
    schema.staged_page_rows,
    schema.staged_pages,
    schema.staged_sections,
    schema.staged_plan,
    schema.staged_events,
    schema.staged_redirects,
    schema.staged_runs,
)
# What each stage writes (a stage that runs again first clears its own rows and the later ones').
_WRITES = {
    "crawl": (schema.staged_extracts, schema.staged_page_rows),
    "sections": (schema.staged_pages, schema.staged_sections),
    "plan": (schema.staged_plan, schema.staged_events, schema.staged_redirects),
}
UPSERT_ACTIONS = ("new", "changed", "moved")
# A staged page row holds every column of `pages` but the commit's own `indexed_signature`.
_STAGED_PAGE_FIELDS = tuple(n for n in PageRow.__dataclass_fields__ if n != "indexed_signature")


class StagingGone(RuntimeError):
    """The staged work a stage needs is not there (a later run started, or it was committed)."""


@dataclass(frozen=True, slots=True)
class StagedPage:
    """Stage 2's decision about one page: its new signature (None: its sections go), the
    URL it moved to, or why it could not be segmented (its sections stay)."""

    url: str
    signature: str | None = None
    moved_to: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PlanRow:
    id: str
    action: str  # new | changed | moved | payload | unchanged | fuzzy | removed
    url: str
    as_of: str | None = None
    old_id: str | None = None  # a moved section's record before the move
    old_url: str | None = None


class Staging:
    """The staging repository (`StateStore.staging`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- a run's staging -----------------------------------------------------------------

    def begin(self, source: str, run_id: str, stage: str) -> None:
        """Open `run_id`'s staging for `stage` (kept when it is open already: then what this
        stage and the later ones staged before is cleared) and drop every other run's."""
        with self.engine.begin() as conn:
            for t in _TABLES:
                conn.execute(delete(t).where(t.c.source == source, t.c.run_id != run_id))
            row = {"source": source, "run_id": run_id, "started_at": time.time()}
            insert_ignore_rows(conn, schema.staged_runs, [row])
        self.restart(source, run_id, stage)

    def restart(self, source: str, run_id: str, stage: str) -> None:
        """Clear what `stage` and the stages after it staged for `run_id` (a step run again)."""
        later = STAGES[STAGES.index(stage) :]
        with self.engine.begin() as conn:
            for name in later:
                for t in _WRITES[name]:
                    conn.execute(delete(t).where(t.c.source == source, t.c.run_id == run_id))
            r = schema.staged_runs
            cleared: dict[str, None] = {n: None for n in later}
            if stage == "crawl":
                cleared["template_blocks"] = None
            conn.execute(update(r).where(r.c.source == source, r.c.run_id == run_id).values(cleared))

    def finish(self, source: str, run_id: str, stage: str, counts: dict[str, Any]) -> None:
        """Record that `stage` staged all its work for `run_id`, with its counts."""
        r = schema.staged_runs
        with self.engine.begin() as conn:
            conn.execute(update(r).where(r.c.source == source, r.c.run_id == run_id).values({stage: counts}))

    def counts(self, source: str, run_id: str, stage: str) -> dict[str, Any] | None:
        """`stage`'s counts for `run_id`, None unless it finished and its staging is still there."""
        r = schema.staged_runs
        with self.engine.connect() as conn:
            return conn.execute(select(r.c[stage]).where(r.c.source == source, r.c.run_id == run_id)).scalar()

    def require(self, source: str, run_id: str, stage: str) -> dict[str, Any]:
        """`stage`'s counts; raises `StagingGone` when its staged work is not there."""
        counts = self.counts(source, run_id, stage)
        if counts is None:
            raise StagingGone(
                f"source {source!r}: the work staged by {stage} in run {run_id} is gone (a later run "
                "started, or it was committed); re-materialize section_manifest and diff_plan"
            )
        return counts

    def drop(self, source: str, run_id: str) -> None:
        with self.engine.begin() as conn:
            for t in _TABLES:
                conn.execute(delete(t).where(t.c.source == source, t.c.run_id == run_id))

    def runs(self, source: str) -> list[str]:
        r = schema.staged_runs
        with self.engine.connect() as conn:
            return list(conn.execute(select(r.c.run_id).where(r.c.source == source)).scalars())

    # -- stage 1: extracts ---------------------------------------------------------------

    def add_extracts(
        self, source: str, run_id: str, items: Iterable[tuple[str, str, str | None, str | None, str | None]]
    ) -> int:
        """(url, markdown, title, date, error) of pages extracted this run; returns how many."""
        rows = (
            {"source": source, "run_id": run_id, "url": u, "markdown": m, "title": t, "date": d, "error": e}
            for u, m, t, d, e in items
        )
        return self._write(schema.staged_extracts, rows)

    def drop_extracts(self, source: str, run_id: str) -> None:
        t = schema.staged_extracts
        with self.engine.begin() as conn:
            conn.execute(delete(t).where(t.c.source == source, t.c.run_id == run_id))

    def extracts(
        self, source: str, run_id: str, urls: Collection[str]
    ) -> dict[str, tuple[str, str | None, str | None, str | None]]:
        t = schema.staged_extracts
        out: dict[str, tuple[str, str | None, str | None, str | None]] = {}
        with self.engine.connect() as conn:
            for part in chunks(urls):
                q = select(t.c.url, t.c.markdown, t.c.title, t.c.date, t.c.error).where(
                    t.c.source == source, t.c.run_id == run_id, t.c.url.in_(part)
                )
                out.update((r.url, (r.markdown, r.title, r.date, r.error)) for r in conn.execute(q))
        return out

    def save_page_rows(self, source: str, run_id: str, rows: Iterable[PageRow]) -> None:
        """Stage the crawl's page rows (upserted: a page saved again replaces its row). A
        row whose `markdown` is None keeps the text staged before, else the committed one."""
        records = (
            {"run_id": run_id, **{n: getattr(r, n) for n in _STAGED_PAGE_FIELDS}, "source": source} for r in rows
        )
        with self.engine.begin() as conn:
            for dicts in split_by_text(records):
                for i in range(0, len(dicts), BATCH):
                    upsert_rows(conn, schema.staged_page_rows, dicts[i : i + BATCH], ["source", "run_id", "url"])

    def stage_template_blocks(self, source: str, run_id: str, blocks: list[str]) -> None:
        """The template blocks the crawl learned, for this run's section stage and commit."""
        r = schema.staged_runs
        with self.engine.begin() as conn:
            conn.execute(update(r).where(r.c.source == source, r.c.run_id == run_id).values(template_blocks=blocks))

    def template_blocks(self, source: str, run_id: str) -> list[str] | None:
        """The template blocks `run_id`'s crawl learned; None when it kept the source's."""
        r = schema.staged_runs
        with self.engine.connect() as conn:
            q = select(r.c.template_blocks).where(r.c.source == source, r.c.run_id == run_id)
            return conn.execute(q).scalar()

    # -- stage 2: pages and sections -----------------------------------------------------

    def add_pages(self, source: str, run_id: str, pages: Iterable[StagedPage]) -> None:
        rows = (
            {
                "source": source,
                "run_id": run_id,
                "url": p.url,
                "signature": p.signature,
                "moved_to": p.moved_to,
                "error": p.error,
            }
            for p in pages
        )
        self._write(schema.staged_pages, rows)

    def pages(self, source: str, run_id: str) -> list[StagedPage]:
        t = schema.staged_pages
        q = select(t.c.url, t.c.signature, t.c.moved_to, t.c.error).where(t.c.source == source, t.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [StagedPage(r.url, r.signature, r.moved_to, r.error) for r in conn.execute(q.order_by(t.c.url))]

    def add_sections(self, source: str, run_id: str, sections: Iterable[Section]) -> None:
        rows = ({"source": source, "run_id": run_id, **section_fields(s), "page_date": s.page_date} for s in sections)
        self._write(schema.staged_sections, rows)

    def sections(self, source: str, run_id: str, urls: Collection[str]) -> list[Section]:
        """The staged sections of these pages."""
        t = schema.staged_sections
        out: list[Section] = []
        with self.engine.connect() as conn:
            for part in chunks(urls):
                q = select(*_section_columns(t)).where(t.c.source == source, t.c.run_id == run_id, t.c.url.in_(part))
                out.extend(_section(r) for r in conn.execute(q))
        return out

    def section_hashes(self, source: str, run_id: str, urls: Collection[str]) -> dict[str, str]:
        """Record id -> content hash of the staged sections of these pages."""
        t = schema.staged_sections
        out: dict[str, str] = {}
        with self.engine.connect() as conn:
            for part in chunks(urls):
                q = select(t.c.id, t.c.content_hash).where(
                    t.c.source == source, t.c.run_id == run_id, t.c.url.in_(part)
                )
                out.update((r.id, r.content_hash) for r in conn.execute(q))
        return out

    def gone_sections(self, source: str, run_id: str, urls: Collection[str]) -> list[tuple[str, str]]:
        """(url, content hash) of the manifest rows of these pages that no staged section keeps."""
        m, s = schema.sections, schema.staged_sections
        kept = exists().where(s.c.source == m.c.source, s.c.run_id == run_id, s.c.id == m.c.id)
        out: list[tuple[str, str]] = []
        with self.engine.connect() as conn:
            for part in chunks(urls):
                q = select(m.c.url, m.c.content_hash).where(m.c.source == source, m.c.url.in_(part), ~kept)
                out.extend((r.url, r.content_hash) for r in conn.execute(q))
        return out

    def sections_with_hashes(
        self, source: str, run_id: str, hashes: Collection[str]
    ) -> list[tuple[str, int, int, str, bool]]:
        """(url, ordinal, chunk index, content hash, whether the manifest lacks its id) of
        the staged sections holding one of these retrieval texts."""
        s, m = schema.staged_sections, schema.sections
        fresh = ~exists().where(m.c.source == s.c.source, m.c.id == s.c.id)
        out: list[tuple[str, int, int, str, bool]] = []
        with self.engine.connect() as conn:
            for part in chunks(hashes):
                q = select(s.c.url, s.c.ordinal, s.c.chunk_index, s.c.content_hash, fresh.label("fresh")).where(
                    s.c.source == source, s.c.run_id == run_id, s.c.content_hash.in_(part)
                )
                out.extend((r.url, r.ordinal, r.chunk_index, r.content_hash, bool(r.fresh)) for r in conn.execute(q))
        return out

    # -- stage 3: the plan ---------------------------------------------------------------

    def add_plan(self, source: str, run_id: str, rows: Iterable[PlanRow]) -> None:
        dicts = (
            {
                "source": source,
                "run_id": run_id,
                "id": r.id,
                "action": r.action,
                "url": r.url,
                "as_of": r.as_of,
                "old_id": r.old_id,
                "old_url": r.old_url,
            }
            for r in rows
        )
        self._write(schema.staged_plan, dicts)

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
        self._write(schema.staged_events, rows)

    def add_redirects(self, source: str, run_id: str, redirects: Iterable[tuple[str, str]]) -> None:
        rows = ({"source": source, "run_id": run_id, "old_key": o, "new_key": n} for o, n in redirects)
        self._write(schema.staged_redirects, rows)

    def planned(
        self, source: str, run_id: str, actions: Collection[str]
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
            *_section_columns(s),
        ]
        q = select(*cols).select_from(joined).where(p.c.source == source, p.c.run_id == run_id, p.c.action.in_(actions))
        for rows in self._by_id(q):
            yield [
                (PlanRow(*r[:6]), None if r[6] is None else _section(r[7:], as_of=r[3]))  # dated as planned
                for r in rows
            ]

    def plan_ids(self, source: str, run_id: str, actions: Collection[str], *, old: bool = True) -> Iterator[list[str]]:
        """The record ids the plan's rows with these actions name (and with `old` a moved
        record's old id), in batches, without reading the sections."""
        p = schema.staged_plan
        q = select(p.c.id, p.c.old_id).where(p.c.source == source, p.c.run_id == run_id, p.c.action.in_(actions))
        for rows in self._by_id(q):
            yield [i for r in rows for i in (r.id, r.old_id if old else None) if i is not None]

    def planned_ids(
        self, source: str, run_id: str, ids: Collection[str], actions: Collection[str], *, old: bool = True
    ) -> set[str]:
        """Which of `ids` the plan's rows with these actions name (and with `old` a moved
        record's old id)."""
        p = schema.staged_plan
        out: set[str] = set()
        with self.engine.connect() as conn:
            for part in chunks(ids):
                for col in (p.c.id, p.c.old_id) if old else (p.c.id,):
                    q = select(col).where(
                        p.c.source == source, p.c.run_id == run_id, p.c.action.in_(actions), col.in_(part)
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

    def _write(self, table: Table, rows: Iterable[dict[str, Any]]) -> int:
        it, written = iter(rows), 0
        while part := list(islice(it, BATCH)):
            with self.engine.begin() as conn:
                conn.execute(table.insert(), part)
            written += len(part)
        return written


# The staged section columns in `Section`'s field order, read by position: a `Row`'s
# attribute lookups would cost more than the rest of reading the staged plan.
_SECTION_COLUMNS = (
    "key", "chunk_index", "url", "heading_path", "ordinal", "text", "embed_text",
    "content_hash", "simhash", "tokens", "page_date", "title",
)  # fmt: skip


def _section_columns(t: Table) -> list[Any]:
    return [t.c[name] for name in _SECTION_COLUMNS]


def _section(v: Sequence[Any], as_of: str | None = None) -> Section:
    key, chunk_index, url, heading_path, ordinal, text, embed_text, content_hash, simhash, tokens, date, title = v
    return Section(
        key, chunk_index, url, tuple(heading_path), ordinal, text, embed_text, content_hash,
        _unsigned(simhash), tokens, date, title, as_of,
    )  # fmt: skip


def promote_page_rows(conn: Connection, source: str, run_id: str) -> list[str] | None:
    """Inside the commit's transaction `conn`: `run_id`'s staged page rows become the
    source's `pages` rows, in one statement (a NULL staged text keeps the committed one; the
    signature stays the commit's). Returns the template blocks its crawl learned, None when
    it kept them."""
    t, names = schema.staged_page_rows, list(_STAGED_PAGE_FIELDS)
    rows = select(*(t.c[n] for n in names)).where(t.c.source == source, t.c.run_id == run_id)
    upsert_select(conn, schema.pages, names, rows, ["source", "url"], keep_stored=("markdown",))
    r = schema.staged_runs
    return conn.execute(select(r.c.template_blocks).where(r.c.source == source, r.c.run_id == run_id)).scalar()
