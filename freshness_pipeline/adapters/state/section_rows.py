"""Manifest rows <-> `Section`s: what the `sections` table stores of each record."""

from __future__ import annotations

from typing import Any

from ...core.models import Section, anchor_of

_MASK64 = (1 << 64) - 1


def _signed(v: int | None) -> int | None:
    return None if v is None else (v - (1 << 64) if v >= 1 << 63 else v)


def _unsigned(v: int | None) -> int | None:
    return None if v is None else v & _MASK64


def section_fields(s: Section) -> dict[str, Any]:
    """The columns a section has wherever it is stored (the manifest, the staging)."""
    return {
        "id": s.id,
        "key": s.key,
        "chunk_index": s.chunk_index,
        "url": s.url,
        "heading_path": list(s.heading_path),
        "ordinal": s.ordinal,
        "text": s.text,
        "embed_text": s.embed_text,
        "content_hash": s.content_hash,
        "simhash": _signed(s.simhash),
        "tokens": s.tokens,
        "title": s.title,
    }


def section_row(source: str, s: Section, now: float, changed_at: float) -> dict[str, Any]:
    return {"source": source, **section_fields(s), "as_of": s.as_of, "indexed_at": now, "changed_at": changed_at}


def section_from_row(row: Any) -> Section:
    return Section(
        key=row.key,
        chunk_index=row.chunk_index,
        url=row.url,
        heading_path=tuple(row.heading_path),
        ordinal=row.ordinal,
        text=row.text,
        embed_text=row.embed_text,
        content_hash=row.content_hash,
        simhash=_unsigned(row.simhash),
        tokens=row.tokens,
        title=row.title,
        as_of=row.as_of,
        anchor=anchor_of(row.id, row.key),
    )
