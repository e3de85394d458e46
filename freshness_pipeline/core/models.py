"""Value types shared by every layer. Pure data: no I/O, no Dagster."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    """What one fetch of one page means for the index."""

    OK = "ok"  # 200 with real content: (re)segment it
    NOT_MODIFIED = "not_modified"  # 304, or a body byte-identical to last time
    GONE = "gone"  # 404 / 410, or missing for N consecutive crawls: delete its sections
    ERROR = "error"  # 5xx, 429, timeout, connection error, redirect loop: keep, retry later
    FLAGGED = "flagged"  # 200 but near-empty or error-like (soft 404, bot wall): keep, review
    SKIPPED = "skipped"  # non-HTML or over the size limit: keep nothing new, delete nothing


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One page as the fetcher saw it. `url` and `final_url` are normalized."""

    url: str
    outcome: Outcome
    status_code: int | None = None
    final_url: str | None = None  # set when the page redirected somewhere else
    temporary: bool = False  # final_url was reached through a 302/303/307: not a move
    reason: str = ""
    html: str | None = None  # body, only when outcome is OK
    etag: str | None = None
    last_modified: str | None = None
    body_sha256: str | None = None
    fetched_at: float = 0.0  # unix seconds
    links: tuple[str, ...] = ()  # absolute hrefs found on the page, for link discovery


@dataclass(frozen=True, slots=True)
class PageText:
    """A fetched page's text as extracted and rule-normalized (template blocks still in),
    or why extraction failed (`error`, with an empty text)."""

    url: str
    markdown: str
    title: str | None
    date: str | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Section:
    """One indexed unit: a heading section, or one chunk of a long one.

    `key` is the section's identity (page URL + heading path) and never depends on its
    text; `content_hash` is the sha256 of exactly what gets embedded (`embed_text`, the
    retrieval text: heading path and words, no links, markup or dates). Everything else
    is payload (`payload_hash`): shown to readers, updated without an embedding call.
    """

    key: str
    chunk_index: int  # position of the chunk within its section
    url: str
    heading_path: tuple[str, ...]
    ordinal: int  # position of the section within its page
    text: str  # normalized section body as markdown (links kept), without the heading line
    embed_text: str  # the retrieval text: what the embedder sees (core/retrieval.py)
    content_hash: str  # sha256 of embed_text
    simhash: int | None  # of embed_text; None when it is too short for a fuzzy fingerprint
    tokens: int  # of embed_text, counted with the embedder's own tokenizer
    page_date: str | None = None  # the page's declared date ("YYYY-MM-DD") when segmented
    title: str | None = None  # the page's title
    as_of: str | None = None  # declared date when the text last changed, else month first seen
    # Which chunk of its section it is, by content: "0" for a section in one chunk, else the
    # fingerprint of its first piece's words (core/pieces.py); not given: its `chunk_index`.
    anchor: str = ""

    def __post_init__(self) -> None:
        if not self.anchor:
            object.__setattr__(self, "anchor", str(self.chunk_index))

    @property
    def id(self) -> str:
        """Record id in the vector store: the key and the chunk's anchor. A chunk inserted
        before it, or its moving within its section, leaves it unchanged."""
        return record_id(self.key, self.anchor)

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)

    @property
    def payload_hash(self) -> str:
        """Identity of what a reader sees besides the vector: text with links, title, as_of."""
        shown = [self.url, self.heading, self.text, self.title, self.as_of]
        return hashlib.sha256(json.dumps(shown).encode()).hexdigest()


def record_id(key: str, anchor: str) -> str:
    return f"{key}:{anchor}"


def anchor_of(record_id: str, key: str) -> str:
    """The anchor part of a record id (`record_id`'s inverse)."""
    return record_id[len(key) + 1 :]


@dataclass(frozen=True, slots=True)
class FuzzyMatch:
    """A section whose exact hash changed but that the fuzzy rule kept as unchanged."""

    id: str
    url: str
    distance: int
    removed_words: tuple[str, ...]
    added_words: tuple[str, ...]


class Action(StrEnum):
    """What a plan does to one record, as the staged plan names each row."""

    NEW = "new"  # a section the index does not hold: embed and write
    CHANGED = "changed"  # its retrieval text changed: embed and write
    MOVED = "moved"  # its text under a new key: write with the old record's vector, delete that one
    PAYLOAD = "payload"  # same retrieval text, new links, title or date: metadata only
    FUZZY = "fuzzy"  # a payload update whose edit the fuzzy match forgave: the indexed retrieval text stays
    UNCHANGED = "unchanged"
    REMOVED = "removed"  # no section holds it any more: delete


UPSERT_ACTIONS = (Action.NEW, Action.CHANGED, Action.MOVED)  # a record written with its vector
PAYLOAD_ACTIONS = (Action.PAYLOAD, Action.FUZZY)  # a record's metadata rewritten in place
CURRENT_ACTIONS = (*UPSERT_ACTIONS, *PAYLOAD_ACTIONS, Action.UNCHANGED)  # every current section
TOUCHED_ACTIONS = (*UPSERT_ACTIONS, *PAYLOAD_ACTIONS, Action.REMOVED)  # a record the index step writes or deletes


@dataclass(frozen=True, slots=True)
class Move:
    """A section that kept its text but changed key (page redirect or renamed heading)."""

    old_id: str
    new: Section


@dataclass(slots=True)
class Plan:
    """What one refresh of one source will do to the index. Produced by `core.plan`."""

    source: str
    new: list[Section] = field(default_factory=list)
    changed: list[Section] = field(default_factory=list)  # retrieval text changed: embed
    moved: list[Move] = field(default_factory=list)
    payload: list[Section] = field(default_factory=list)  # same retrieval text, new payload
    unchanged: list[str] = field(default_factory=list)  # ids kept as they are
    removed: list[str] = field(default_factory=list)  # ids whose section no longer exists
    key_redirects: list[tuple[str, str]] = field(default_factory=list)  # old key -> new key
    fuzzy: list[FuzzyMatch] = field(default_factory=list)
    current: list[Section] = field(default_factory=list)  # every planned section, as_of set

    @property
    def upserts(self) -> list[Section]:
        """Every section whose record must be written (vectors come from the cache first)."""
        return [*self.new, *self.changed, *(m.new for m in self.moved)]

    @property
    def deletes(self) -> list[str]:
        """Every record id to delete: removed sections and the old ids of moved ones."""
        return [*self.removed, *(m.old_id for m in self.moved)]
