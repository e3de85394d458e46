"""What the section stage stages: its decision about each page whose sections change
(`staged_pages`) and the current sections of the pages it re-segmented (`staged_sections`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Table, exists, select

from ....core.models import Section, anchor_of
from .. import schema
from ..dialect import chunks
from ..section_rows import _unsigned, section_fields
from .rows import write_rows


@dataclass(frozen=True, slots=True)
class StagedPage:
    """The section stage's decision about one page: its new signature (None: its sections
    go), the URL it moved to, or why it could not be segmented (its sections stay); the
    template blocks its text had (`cut_blocks`, recorded by the commit)."""

    url: str
    signature: str | None = None
    moved_to: str | None = None
    error: str | None = None
    cut_blocks: tuple[str, ...] | None = None


class SectionStaging:
    """The section stage's staged work (`StateStore.section_staging`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add_pages(self, source: str, run_id: str, pages: Iterable[StagedPage]) -> None:
        rows = (
            {
                "source": source,
                "run_id": run_id,
                "url": p.url,
                "signature": p.signature,
                "cut_blocks": None if p.cut_blocks is None else list(p.cut_blocks),
                "moved_to": p.moved_to,
                "error": p.error,
            }
            for p in pages
        )
        write_rows(self.engine, schema.staged_pages, rows)

    def pages(self, source: str, run_id: str) -> list[StagedPage]:
        t = schema.staged_pages
        q = select(t.c.url, t.c.signature, t.c.moved_to, t.c.error).where(t.c.source == source, t.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [StagedPage(r.url, r.signature, r.moved_to, r.error) for r in conn.execute(q.order_by(t.c.url))]

    def add_sections(self, source: str, run_id: str, sections: Iterable[Section]) -> None:
        rows = ({"source": source, "run_id": run_id, **section_fields(s), "page_date": s.page_date} for s in sections)
        write_rows(self.engine, schema.staged_sections, rows)

    def sections(self, source: str, run_id: str, urls: Collection[str]) -> list[Section]:
        """The staged sections of these pages."""
        t = schema.staged_sections
        out: list[Section] = []
        with self.engine.connect() as conn:
            for part in chunks(urls):
                q = select(*section_columns(t)).where(t.c.source == source, t.c.run_id == run_id, t.c.url.in_(part))
                out.extend(section_from_row(r) for r in conn.execute(q))
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


# The staged section columns in `Section`'s field order, read by position: a `Row`'s
# attribute lookups would cost more than the rest of reading the staged plan.
_SECTION_COLUMNS = (
    "key", "chunk_index", "url", "heading_path", "ordinal", "text", "embed_text",
    "content_hash", "simhash", "tokens", "page_date", "title", "id",
)  # fmt: skip


def section_columns(t: Table) -> list[Any]:
    return [t.c[name] for name in _SECTION_COLUMNS]


def section_from_row(v: Sequence[Any], as_of: str | None = None) -> Section:
    key, chunk_index, url, heading_path, ordinal, text, embed_text, content_hash, simhash, tokens, date, title, id_ = v
    return Section(
        key, chunk_index, url, tuple(heading_path), ordinal, text, embed_text, content_hash,
        _unsigned(simhash), tokens, date, title, as_of, anchor_of(id_, key),
    )  # fmt: skip
