"""What the pipeline knows about a source and its pages between runs: plain values that the
state store maps to its tables and back. Pure data: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from .quarantine import Quarantine

__all__ = ["ChangeEvent", "PageRow", "SectionTimes", "SourceState"]


@dataclass(slots=True)
class SourceState:
    source: str
    normalizer_version: str
    chunker_version: str
    embed_model: str
    embed_dims: int
    active_version: int = 1
    generation: int = 0
    template_blocks: list[str] = field(default_factory=list)
    retired_namespaces: list[str] = field(default_factory=list)
    updated_at: float = 0.0


@dataclass(slots=True)
class PageRow:
    source: str
    url: str
    fetch_url: str
    state: str = "live"  # live | gone | moved | candidate (listed, never answered with a page)
    moved_to: str | None = None
    outcome: str | None = None
    status_code: int | None = None
    reason: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    body_sha256: str | None = None
    markdown: str | None = None
    text_hash: str | None = None
    title: str | None = None
    page_date: str | None = None
    indexed_signature: str | None = None
    cut_blocks: list[str] | None = None  # the template blocks its text had when its indexed sections were cut
    tier: str = "warm"
    flag: str | None = None
    miss_count: int = 0
    error_count: int = 0
    lastmod: str | None = None
    first_seen: float = 0.0
    last_fetched: float | None = None
    last_changed: float | None = None
    change_times: list[float] = field(default_factory=list)
    quarantine: Quarantine | None = None  # why its last answer is held (`core/quarantine.py`)


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    url: str
    kind: str  # new | changed | gone
    content_hash: str | None
    section_keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SectionTimes:
    """When a manifest section's text last changed and when it was last written to the index."""

    url: str
    changed_at: float
    indexed_at: float
