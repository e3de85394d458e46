"""The pieces a long section is cut between, and which of its indexed chunks still stand.
Pure.

A section over the token budget is a run of pieces: paragraphs, list items, table rows,
code blocks, or cuts of one that alone is over the budget. A chunk is pieces [start, end)
joined (`render`). Its anchor, part of its record id, is the fingerprint of its first
piece's words, so markup and list numbers rename nothing.

`kept` finds the chunks a section had when it was indexed whose exact markdown its pieces
still make, wherever they now stand: those are kept as they were (same id, same text, no
embedding), and only the pieces between them are cut again. An edit then costs the chunk
that holds it, and an inserted row a chunk of the rows inserted beside it; no boundary
depends on a piece's distance from the section's start.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from freshness_pipeline.core.retrieval import plain_text

__all__ = ["Piece", "anchor", "kept", "list_items", "render", "table_rows"]

_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,9}[.)])(?:\s|$)")
_DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")


@dataclass(frozen=True, slots=True)
class Piece:
    """A unit of a long section."""

    text: str
    joiner: str  # placed before it when it follows another piece in the same chunk
    header: str = ""  # a table row's header and delimiter rows: a chunk starting at the row repeats them
    table: int = -1  # the block whose table row it is

    def opening(self, before: Piece | None) -> str:
        """Its markdown after `before` in one chunk (None: it starts the chunk); a table
        row that starts the chunk, or its table within it, brings the table's header."""
        own = f"{self.header}\n{self.text}" if self.header else self.text
        if before is None:
            return own
        return self.joiner + (own if before.table != self.table else self.text)


def render(pieces: Sequence[Piece]) -> str:
    """The markdown of consecutive pieces as one chunk."""
    return "".join(p.opening(pieces[i - 1] if i else None) for i, p in enumerate(pieces))


def anchor(piece: Piece) -> str:
    """The content anchor of a chunk that starts with `piece`: 12 hex digits of the
    fingerprint of its words (its plain text: no markup, no list marker)."""
    return hashlib.blake2b(plain_text(piece.text).strip().encode(), digest_size=8).hexdigest()[:12]


def kept(pieces: Sequence[Piece], previous: Sequence[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """(start, end, anchor) of each chunk of `previous` ((anchor, markdown) as indexed)
    whose markdown pieces [start, end) make exactly, left to right, each chunk used once.

    A chunk is looked for where a piece has its anchor; one anchored "0" (the section fitted
    in one chunk) at every piece, so a section that grew past the budget keeps it too.
    """
    if not previous:  # a first index: no anchor to compute
        return []
    by_anchor: dict[str, list[tuple[str, str]]] = {}
    whole: list[tuple[str, str]] = []
    for name, text in previous:
        base = name.partition("~")[0]
        (whole if base == "0" else by_anchor.setdefault(base, [])).append((name, text))
    out: list[tuple[int, int, str]] = []
    used: set[str] = set()
    start = 0
    while start < len(pieces):
        for name, text in by_anchor.get(anchor(pieces[start]), []) + whole:
            if name not in used and (end := _made(pieces, start, text)) is not None:
                out.append((start, end, name))
                used.add(name)
                start = end
                break
        else:
            start += 1
    return out


def _made(pieces: Sequence[Piece], start: int, text: str) -> int | None:
    """The end of the pieces from `start` whose markdown as one chunk is `text`, if any."""
    at, end, before = 0, start, None
    while at < len(text):
        if end == len(pieces):
            return None
        part = pieces[end].opening(before)
        if not text.startswith(part, at):
            return None
        at, before, end = at + len(part), pieces[end], end + 1
    return end if end > start else None


def table_rows(block: str) -> tuple[str, list[str]] | None:
    """(header and delimiter rows, body rows) of a block that is one pipe table."""
    lines = block.split("\n")
    if len(lines) > 2 and lines[0].lstrip().startswith("|") and _DELIMITER_ROW.match(lines[1]):
        return "\n".join(lines[:2]), lines[2:]
    return None


def list_items(block: str) -> list[str] | None:
    """The items of a block that is one list (each with its nested lines), else None."""
    lines = block.split("\n")
    first = _ITEM.match(lines[0])
    if first is None:
        return None
    indent = len(first.group(1))
    items: list[list[str]] = []
    for line in lines:
        m = _ITEM.match(line)
        if m is not None and len(m.group(1)) == indent:
            items.append([line])
        else:
            items[-1].append(line)
    return ["\n".join(item) for item in items]
