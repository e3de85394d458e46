"""The manifest (`sections`: what the active index holds) and its key redirects. Reads
here; the only write is `commit` (see `commit.py`), one transaction after the index writes."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from sqlalchemy import Engine, func, select

from ...core.models import Plan, Section
from ...core.state import ChangeEvent, SectionTimes, SourceState
from . import schema
from .commit import commit_plan
from .dialect import chunks
from .section_rows import section_from_row

_MAX_HOPS = 64  # a redirect chain longer than this is a loop
_STREAM_ROWS = 10_000  # rows fetched at a time by a streamed read


class Manifest:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def sections(self, source: str, urls: Collection[str] | None = None) -> list[Section]:
        """Every section of the source (ordered by page), or those of `urls`."""
        t = schema.sections
        with self.engine.connect() as conn:
            if urls is None:
                q = select(t).where(t.c.source == source).order_by(t.c.url, t.c.ordinal)
                return [section_from_row(r) for r in conn.execute(q)]
            out: list[Section] = []
            for part in chunks(urls):
                q = select(t).where(t.c.source == source, t.c.url.in_(part))
                out.extend(section_from_row(r) for r in conn.execute(q))
            return out

    def by_id(self, source: str, ids: Collection[str]) -> list[Section]:
        t = schema.sections
        out: list[Section] = []
        with self.engine.connect() as conn:
            for part in chunks(ids):
                q = select(t).where(t.c.source == source, t.c.id.in_(part))
                out.extend(section_from_row(r) for r in conn.execute(q))
        return out

    def by_key(self, source: str | None, key: str) -> list[Section]:
        """The chunks of one section key (in any source when `source` is None)."""
        t = schema.sections
        q = select(t).where(t.c.key == key).order_by(t.c.chunk_index)
        if source:
            q = q.where(t.c.source == source)
        with self.engine.connect() as conn:
            return [section_from_row(r) for r in conn.execute(q)]

    def hashes(self, source: str) -> dict[str, str]:
        """Record id -> content hash, what the vector store must hold."""
        return dict(self.iter_hashes(source))

    def iter_hashes(self, source: str) -> Iterator[tuple[str, str]]:
        """(record id, content hash) by id, streamed (the primary key's order)."""
        t = schema.sections
        with self.engine.connect() as conn:
            q = select(t.c.id, t.c.content_hash).where(t.c.source == source).order_by(t.c.id)
            for r in conn.execution_options(yield_per=_STREAM_ROWS).execute(q):
                yield r.id, r.content_hash

    def count(self, source: str) -> int:
        t = schema.sections
        with self.engine.connect() as conn:
            q = select(func.count()).select_from(t).where(t.c.source == source)
            return int(conn.execute(q).scalar_one())

    def times(self, source: str) -> Iterator[SectionTimes]:
        """When each section's text last changed and when it was last written to the index,
        streamed (a source's sections are not held at once)."""
        t = schema.sections
        with self.engine.connect() as conn:
            q = select(t.c.url, t.c.changed_at, t.c.indexed_at).where(t.c.source == source)
            for r in conn.execution_options(yield_per=_STREAM_ROWS).execute(q):
                yield SectionTimes(r.url, r.changed_at, r.indexed_at)

    def summaries(self, source: str) -> Iterator[dict[str, Any]]:
        """Every chunk's columns but its text (key, url, heading_path, title, content_hash,
        as_of, chunk_index, tokens, changed_at, indexed_at), by page and position, streamed."""
        t = schema.sections
        columns = (t.c.key, t.c.url, t.c.heading_path, t.c.title, t.c.content_hash, t.c.as_of, t.c.chunk_index)
        q = (
            select(*columns, t.c.tokens, t.c.changed_at, t.c.indexed_at)
            .where(t.c.source == source)
            .order_by(t.c.url, t.c.ordinal, t.c.chunk_index)
        )
        with self.engine.connect() as conn:
            for r in conn.execution_options(yield_per=_STREAM_ROWS).execute(q):
                yield r._asdict()

    def resolve_key(self, source: str | None, key: str) -> tuple[str, list[str]]:
        """Follow key redirects to the current key; returns (key, the hops taken)."""
        t = schema.key_redirects
        hops: list[str] = []
        with self.engine.connect() as conn:
            while key not in hops and len(hops) < _MAX_HOPS:
                q = select(t.c.new_key).where(t.c.old_key == key)
                if source:
                    q = q.where(t.c.source == source)
                nxt = conn.execute(q).scalar()
                if nxt is None:
                    break
                hops.append(key)
                key = nxt
        return key, hops

    def commit(
        self,
        state: SourceState,
        plans: Iterable[Plan],
        *,
        base_generation: int,
        replace_all: bool,
        signatures: Mapping[str, str | None],
        events: Iterable[ChangeEvent],
        run: Mapping[str, Any],
        staged_run: str | None = None,
    ) -> None:
        """Apply a plan, in batches (`plans`), to the manifest in one transaction, after the index writes; also
        records key redirects, page signatures, change events and the run, and promotes the
        page rows `staged_run`'s crawl staged into `pages`. Refuses (`StalePlan`) when
        another commit landed since the plan was made."""
        with self.engine.begin() as conn:
            commit_plan(
                conn,
                state,
                plans,
                base_generation=base_generation,
                replace_all=replace_all,
                signatures=signatures,
                events=events,
                run=run,
                staged_run=staged_run,
            )
