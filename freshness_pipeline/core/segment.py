"""Normalized page markdown -> `Section`s with stable keys.

A section is the text under one heading (`#` or underlined, outside lists and block
quotes: `core/blocks.py`), keyed by page URL + heading path: its key never depends on its
text, on its position, or on the other sections' text. A section whose retrieval text
(heading path included) is over the token budget, counted with the embedder's own
tokenizer, is split into chunks, deterministically: nothing is ever truncated by the model.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from freshness_pipeline.core.blocks import split_blocks
from freshness_pipeline.core.fingerprint import content_hash, simhash
from freshness_pipeline.core.models import Section
from freshness_pipeline.core.retrieval import inline_text, retrieval_text
from freshness_pipeline.core.tokens import get_encoding

__all__ = ["CHUNKER_VERSION", "TokenCount", "section_key", "segment"]

# Bump whenever keys, chunk boundaries or embed texts would come out differently.
# 2: embed text is the retrieval text (no "as of" header, links or markup); the budget is
# counted on it, heading path included, with the embedder's tokenizer.
# 3: a page whose only text is its headings is one section of them.
# 4: headings as CommonMark reads them (core/blocks.py): underlined ones start sections,
# `#` lines in list items, block quotes and html blocks do not; a heading's text is its
# inline markdown's words, as the body's (entities decoded, `_` emphasis gone).
CHUNKER_VERSION = "4"

TokenCount = Callable[[str], int]  # tokens of a text, as the embedder will count them

# Where an oversized block is cut, coarsest first: lines (list items, code), then sentences.
_SPLITS = (re.compile(r"(\n)"), re.compile(r"(?<=[.!?])(\s+)"))


def section_key(url: str, heading_path: tuple[str, ...]) -> str:
    return hashlib.sha1(f"{url}#{' > '.join(heading_path)}".encode()).hexdigest()


def _headings_only(markdown: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """A page whose only text is its headings (a title above a form or an embed) is one
    section of those headings at the page's root: it stays findable by its title, and a
    line the noise rules strip (a "Last updated" date) cannot make it lose its record."""
    headings = [b.text for b in split_blocks(markdown) if b.kind == "heading" and inline_text(b.inline)]
    return [((), headings)] if headings else []


def _sections(markdown: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """(heading path, body blocks) in document order, the text before any heading first;
    only sections with a body."""
    return [(path, blocks) for path, blocks in _all_sections(markdown) if any(b.strip() for b in blocks)]


def _all_sections(markdown: str) -> Iterator[tuple[tuple[str, ...], list[str]]]:
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
        if block.kind != "heading":
            body.append(block.text)
            continue
        yield path, body
        while stack and stack[-1][0] >= block.level:
            stack.pop()
        stack.append((block.level, inline_text(block.inline)))
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
    """Packs a section body into chunks whose retrieval text is at most `budget` tokens.

    Packing estimates a chunk's size as the sum of its pieces' (each counted once, plus one
    token per joint), then checks every chunk exactly; only when markup across pieces
    fooled the estimate is the section packed again with an exact count per step. A
    2,000-item list then costs one count per item, not one per item per chunk.
    """

    def __init__(self, budget: int, count: TokenCount, heading_path: tuple[str, ...]) -> None:
        self.budget = budget
        self.count_text = count
        self.heading_path = heading_path
        self._memo: dict[str, tuple[str, int]] = {}  # markdown -> (retrieval text, tokens)
        self.base = self.count("")  # the heading path (and a model's special tokens)
        if self.base > budget - 4:  # a heading path alone must leave room for words
            raise ValueError(f"heading {' > '.join(heading_path)!r} alone is over the {budget}-token budget")

    def measure(self, markdown: str) -> tuple[str, int]:
        """(retrieval text, its tokens) of a chunk's markdown, each computed once."""
        if markdown not in self._memo:
            text = retrieval_text(self.heading_path, markdown)
            self._memo[markdown] = text, self.count_text(text)
        return self._memo[markdown]

    def count(self, markdown: str) -> int:
        return self.measure(markdown)[1]

    def fits(self, markdown: str) -> bool:
        return self.count(markdown) <= self.budget

    def chunks(self, blocks: list[str]) -> list[str]:
        body = "\n\n".join(blocks)
        if self.fits(body):
            return [body]
        pieces = [p for block in blocks for p in self._pieces(block)]
        packed = self._pack(pieces, estimate=True)
        if all(self.fits(c) for c in packed):
            return packed
        return self._pack(pieces, estimate=False)

    def _pack(self, pieces: list[_Piece], *, estimate: bool) -> list[str]:
        out: list[str] = []
        current, used = "", 0
        for piece in pieces:
            own = self.count(piece.text) - self.base if estimate else 0
            candidate = f"{current}{piece.joiner}{piece.text}"
            if current and (used + own + 1 <= self.budget if estimate else self.fits(candidate)):
                current, used = candidate, used + own + 1
            else:
                if current:
                    out.append(current)
                current, used = piece.text, self.base + own
        out.append(current)
        return out

    def _pieces(self, text: str, joiner: str = "\n\n", level: int = 0) -> Iterator[_Piece]:
        """`text` whole if it fits, else cut at the next finer boundary: lines, sentences,
        then token windows. The separators cut at become the pieces' joiners."""
        if self.fits(text):
            yield _Piece(text, joiner)
        elif level == len(_SPLITS):
            for i, window in enumerate(self._windows(text)):
                yield _Piece(window, joiner if i == 0 else " ")
        else:
            parts = _SPLITS[level].split(text)  # [text, separator, text, ...]
            for i in range(0, len(parts), 2):
                if parts[i]:
                    yield from self._pieces(parts[i], parts[i - 1] if i else joiner, level + 1)

    def _windows(self, text: str) -> list[str]:
        """`text` cut into the longest prefixes that fit, at a space when there is one
        (galloping then binary search: any tokenizer, no offsets needed)."""
        out: list[str] = []
        rest = text.strip()
        while rest:
            if not self.fits(rest[:1]):
                raise ValueError(f"one character of {rest[:20]!r} is over the {self.budget}-token budget")
            lo, hi = 1, min(len(rest), 2 * self.budget)  # rest[:lo] fits
            while hi < len(rest) and self.fits(rest[:hi]):
                lo, hi = hi, min(len(rest), 2 * hi)
            if self.fits(rest[:hi]):  # the whole rest
                out.append(rest)
                break
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if self.fits(rest[:mid]) else (lo, mid)
            cut = rest.rfind(" ", 0, lo + 1)
            if cut <= 0 or not self.fits(rest[:cut]):
                cut = lo
            out.append(rest[:cut].rstrip())
            rest = rest[cut:].lstrip()
        return out


def tiktoken_counter(encoding: str = "cl100k_base") -> TokenCount:
    """Tokens of a text in a tiktoken encoding (OpenAI models, and the default)."""
    enc = get_encoding(encoding)
    return lambda text: len(enc.encode_ordinary(text))


def segment(
    url: str,
    markdown: str,
    *,
    page_date: str | None = None,
    title: str | None = None,
    budget: int = 400,
    encoding: str = "cl100k_base",
    count: TokenCount | None = None,
) -> list[Section]:
    """The sections of one page's normalized markdown, each chunk's retrieval text at most
    `budget` tokens as `count` measures them (default: `encoding`, a tiktoken encoding).

    `url` must be the page's normalized URL: it is part of every key. `page_date` (the
    page's declared date) and `title` are payload: they never change what is embedded.
    """
    if budget < 8:
        raise ValueError(f"budget must be at least 8 tokens, got {budget}")
    count = count or tiktoken_counter(encoding)
    out: list[Section] = []
    ordinal = 0
    for path, blocks in _sections(markdown) or _headings_only(markdown):
        blocks = [b for b in blocks if b.strip()]
        if not blocks:
            continue
        key = section_key(url, path)
        chunker = _Chunker(budget, count, path)
        for index, text in enumerate(chunker.chunks(blocks)):
            embed_text, tokens = chunker.measure(text)
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
                    simhash=simhash(embed_text),
                    tokens=tokens,
                    page_date=page_date,
                    title=title,
                )
            )
        ordinal += 1
    return out
