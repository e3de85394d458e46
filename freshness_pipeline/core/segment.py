"""Normalized page markdown -> `Section`s with stable keys.

A section is the text under one ATX heading, keyed by page URL + heading path: its key never
depends on its text, on its position, or on the other sections' text. Sections over the
token budget are split into chunks, deterministically.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from freshness_pipeline.core.fingerprint import content_hash, simhash
from freshness_pipeline.core.models import Section
from freshness_pipeline.core.noise import is_heading, split_blocks
from freshness_pipeline.core.tokens import get_encoding

__all__ = ["CHUNKER_VERSION", "heading_text", "section_key", "segment"]

# Bump whenever keys, chunk boundaries or embed texts would come out differently.
CHUNKER_VERSION = "1"

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_PAGE_DATE = re.compile(r"(\d{4})-(\d{2})(?:-\d{2})?")

_ATX = re.compile(r" {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
# `*` only: trafilatura writes emphasis with stars, and `_` is part of identifiers.
_EMPHASIS = re.compile(r"(?<![\\*])(\*{1,3})(\S|\S.*?\S)(?<!\\)\1")
_ESCAPE = re.compile(r"\\([^\w\s])")
# Where an oversized block is cut, coarsest first: lines (list items, code), then sentences.
_SPLITS = (re.compile(r"(\n)"), re.compile(r"(?<=[.!?])(\s+)"))


def heading_text(line: str) -> str:
    """The text of an ATX heading line: no `#`s, links, code ticks, emphasis or tags."""
    m = _ATX.fullmatch(line)
    text = (m.group(1) or "") if m else line
    text = _IMAGE_OR_LINK.sub(r"\1", text)
    text = _HTML_TAG.sub("", text).replace("`", "")
    text = _EMPHASIS.sub(r"\2", text)
    return " ".join(_ESCAPE.sub(r"\1", text).split())


def section_key(url: str, heading_path: tuple[str, ...]) -> str:
    return hashlib.sha1(f"{url}#{' > '.join(heading_path)}".encode()).hexdigest()


def _month(page_date: str) -> tuple[str, str]:
    """("YYYY-MM", "Mon YYYY") of a "YYYY-MM" or "YYYY-MM-DD" date."""
    m = _PAGE_DATE.fullmatch(page_date)
    if m is None or not 1 <= int(m.group(2)) <= 12:
        raise ValueError(f"page_date must be YYYY-MM or YYYY-MM-DD, got {page_date!r}")
    year, month = m.groups()
    return f"{year}-{month}", f"{_MONTHS[int(month) - 1]} {year}"


def _sections(markdown: str) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """(heading path, body blocks) in document order, the text before any heading first.

    The n-th occurrence of a heading path gets " [n]" on its last part. Paths are built from
    the headings as written, so removing a section renumbers only its own later namesakes
    (and those of its subsections), onto keys that existed before.
    """
    stack: list[tuple[int, str]] = []  # (level, text) of the enclosing headings
    seen: Counter[tuple[str, ...]] = Counter()
    used: set[tuple[str, ...]] = set()
    path: tuple[str, ...] = ()
    body: list[str] = []
    for block in split_blocks(markdown):
        if not is_heading(block):
            body.append(block)
            continue
        yield path, body
        level = len(block.lstrip(" ")) - len(block.lstrip(" ").lstrip("#"))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading_text(block)))
        written = tuple(text for _, text in stack)
        seen[written] += 1
        n = seen[written]
        path = written if n == 1 else (*written[:-1], f"{written[-1]} [{n}]")
        while path in used:  # a heading literally written "X [2]" took the name
            n += 1
            path = (*written[:-1], f"{written[-1]} [{n}]")
        used.add(path)
        body = []
    yield path, body


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    joiner: str  # placed before it when it follows another piece in the same chunk


class _Chunker:
    """Packs a section body into chunks of at most `budget` tokens."""

    def __init__(self, budget: int, encoding: str) -> None:
        if budget < 4:  # one character can take 4 tokens (one per UTF-8 byte)
            raise ValueError(f"budget must be at least 4 tokens, got {budget}")
        self.budget = budget
        self.encoding = get_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def chunks(self, blocks: list[str]) -> list[str]:
        body = "\n\n".join(blocks)
        if self.count(body) <= self.budget:
            return [body]
        out: list[str] = []
        current = ""
        for piece in (p for block in blocks for p in self._pieces(block)):
            candidate = f"{current}{piece.joiner}{piece.text}" if current else piece.text
            if not current or self.count(candidate) <= self.budget:
                current = candidate
            else:
                out.append(current)
                current = piece.text
        out.append(current)
        return out

    def _pieces(self, text: str, joiner: str = "\n\n", level: int = 0) -> Iterator[_Piece]:
        """`text` whole if it fits, else cut at the next finer boundary: lines, sentences,
        then token windows. The separators cut at become the pieces' joiners."""
        if self.count(text) <= self.budget:
            yield _Piece(text, joiner)
        elif level == len(_SPLITS):
            for i, window in enumerate(self._windows(text)):
                yield _Piece(window, joiner if i == 0 else "")
        else:
            parts = _SPLITS[level].split(text)  # [text, separator, text, ...]
            for i in range(0, len(parts), 2):
                if parts[i]:
                    yield from self._pieces(parts[i], parts[i - 1] if i else joiner, level + 1)

    def _windows(self, text: str) -> list[str]:
        """`text` cut at token boundaries into spans of at most `budget` tokens."""
        tokens = self.encoding.encode_ordinary(text)
        _, offsets = self.encoding.decode_with_offsets(tokens)
        cuts = [offsets[i] for i in range(self.budget, len(tokens), self.budget)]
        spans = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)]) if a < b]
        # A span re-encodes to at most a few more tokens than it was cut from: halve those.
        out: list[str] = []
        for span in spans:
            if self.count(span) <= self.budget or len(span) == 1:
                out.append(span)
            else:
                out += self._windows(span[: len(span) // 2]) + self._windows(span[len(span) // 2 :])
        return out


def segment(
    url: str,
    markdown: str,
    *,
    page_date: str | None = None,
    budget: int = 400,
    encoding: str = "cl100k_base",
) -> list[Section]:
    """The sections of one page's normalized markdown, chunked to `budget` tokens.

    `url` must be the page's normalized URL: it is part of every key.
    """
    month, as_of = _month(page_date) if page_date else (None, None)
    chunker = _Chunker(budget, encoding)
    out: list[Section] = []
    ordinal = 0
    for path, blocks in _sections(markdown):
        blocks = [b for b in blocks if b.strip()]
        if not blocks:
            continue
        key = section_key(url, path)
        for index, text in enumerate(chunker.chunks(blocks)):
            embed_text = f"(as of {as_of})\n\n{text}" if as_of else text
            out.append(
                Section(
                    key=key,
                    chunk_index=index,
                    url=url,
                    heading_path=path,
                    ordinal=ordinal,
                    text=text,
                    embed_text=embed_text,
                    content_hash=content_hash(embed_text),
                    simhash=simhash(text),
                    tokens=chunker.count(text),
                    page_date=month,
                )
            )
        ordinal += 1
    return out
