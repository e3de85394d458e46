"""The pieces a long section is cut between. Pure.

A section over the token budget is a run of pieces: paragraphs, list items, table rows,
code blocks, or cuts of one that alone is over the budget. A chunk is pieces [start, end)
joined (`render`); where the cuts fall is `core/boundaries.py`'s. Its anchor, part of its
record id, is the fingerprint of its first piece's words (`words`), so markup and list
numbers rename nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from freshness_pipeline.core.boundaries import fingerprint
from freshness_pipeline.core.retrieval import plain_text

__all__ = ["Piece", "anchor", "list_items", "render", "table_rows", "words"]

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


def words(piece: Piece) -> int:
    """The fingerprint of a piece's words (its plain text: no markup, no list marker)."""
    return fingerprint(plain_text(piece.text))


def anchor(fp: int) -> str:
    """The content anchor of a chunk whose first piece's words have fingerprint `fp`."""
    return f"{fp:016x}"[:12]


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
