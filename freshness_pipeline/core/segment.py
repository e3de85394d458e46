"""Normalized page markdown -> `Section`s with stable keys.

A section is the text under one heading (`#` or underlined, outside lists and block
quotes: `core/blocks.py`), keyed by page URL + heading path: its key never depends on its
text, on its position, or on the other sections' text. A section whose retrieval text
(heading path included) is over the token budget, counted with the embedder's own
tokenizer, is split into chunks, deterministically: nothing is ever truncated by the model.
Where it is split depends on the content around each cut, not on the cut's position
(`core/boundaries.py`), and a chunk's id on its first piece (`core/pieces.py`): an edit in
a long section re-embeds the chunks of its first-level group and at most one neighbour,
not every chunk after it. A page's sections depend only on its text and the settings:
nothing here reads the index.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from freshness_pipeline.core.blocks import Block, split_blocks
from freshness_pipeline.core.boundaries import spans
from freshness_pipeline.core.fingerprint import content_hash, fold_typography, simhash
from freshness_pipeline.core.models import Section
from freshness_pipeline.core.pieces import Piece, anchor, list_items, render, table_rows, words
from freshness_pipeline.core.retrieval import inline_text, retrieval_text
from freshness_pipeline.core.tokens import get_encoding

__all__ = ["CHUNKER_VERSION", "TokenCount", "section_key", "segment"]

# Bump whenever keys, chunk boundaries or embed texts would come out differently. What this
# version cuts: headings as CommonMark reads them (core/blocks.py), a page of headings alone
# as one section of them; embed text is the retrieval text (heading path, words; no links or
# markup), counted against the budget with the embedder's tokenizer; a section over the
# budget is cut where its pieces' words say (core/boundaries.py), a table row starting a
# chunk brings the table's header, and a chunk's id is its section key and content anchor.
# A page's chunks depend on its text and the chunking settings alone.
CHUNKER_VERSION = "7"

TokenCount = Callable[[str], int]  # tokens of a text, as the embedder will count them

# Where an oversized block is cut, coarsest first: lines (list items, code), then sentences.
_SPLITS = (re.compile(r"(\n)"), re.compile(r"(?<=[.!?])(\s+)"))

# In a long section, runs between content-defined cuts average half the budget after the
# heading path, a run under half that joins the next, and a group over the budget is cut
# again: chunks of cut sections come out at 0.34-0.49 of the budget on the shipped corpora.
# The default of `chunking.target_share`, chosen by retrieval and cost (docs/benchmarks.md,
# "Chunk target"): the cheapest target within one hit@5 point of the best everywhere.
TARGET_SHARE = 2


def section_key(url: str, heading_path: tuple[str, ...]) -> str:
    """The section's identity: its page and heading path, typography folded (a heading's
    quote style is no other section)."""
    return hashlib.sha1(f"{url}#{fold_typography(' > '.join(heading_path))}".encode()).hexdigest()


def _headings_only(markdown: str) -> list[tuple[tuple[str, ...], list[Block]]]:
    """A page whose only text is its headings (a title above a form or an embed) is one
    section of those headings at the page's root: it stays findable by its title, and a
    line the noise rules strip (a "Last updated" date) cannot make it lose its record."""
    headings = [Block(b.text, "text") for b in split_blocks(markdown) if b.kind == "heading" and inline_text(b.inline)]
    return [((), headings)] if headings else []


def _sections(markdown: str) -> list[tuple[tuple[str, ...], list[Block]]]:
    """(heading path, body blocks) in document order, the text before any heading first;
    only sections with a body."""
    return [(path, blocks) for path, blocks in _all_sections(markdown) if any(b.text.strip() for b in blocks)]


def _all_sections(markdown: str) -> Iterator[tuple[tuple[str, ...], list[Block]]]:
    """(heading path, body blocks) in document order, the text before any heading first.

    The n-th occurrence of a heading path gets " [n]" on its last part. Paths are built from
    the headings as written, so removing a section renumbers only its own later namesakes
    (and those of its subsections), onto keys that existed before.
    """
    stack: list[tuple[int, str]] = []  # (level, text) of the enclosing headings
    seen: Counter[tuple[str, ...]] = Counter()
    used: set[tuple[str, ...]] = set()
    path: tuple[str, ...] = ()
    body: list[Block] = []
    for block in split_blocks(markdown):
        if block.kind != "heading":
            body.append(block)
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
class _Chunk:
    """One chunk of a section: its markdown and its content anchor (part of its id)."""

    text: str
    anchor: str


class _Chunker:
    """Cuts a section body into chunks whose retrieval text is at most `budget` tokens.

    A body over the budget is cut between its pieces where their words say
    (`core/boundaries.py`), on estimated sizes (each piece counted once, plus one token
    per joint); every chunk is then counted exactly, and one that markup across pieces
    made too long is cut again with an exact count per step. A 2,000-item list then costs
    one count per item, not one per item per chunk.
    """

    def __init__(self, budget: int, count: TokenCount, heading_path: tuple[str, ...], share: int) -> None:
        self.budget = budget
        self.count_text = count
        self.heading_path = heading_path
        self._memo: dict[str, tuple[str, int]] = {}  # markdown -> (retrieval text, tokens)
        self.base = self.count("")  # the heading path (and a model's special tokens)
        if self.base > budget - 4:  # a heading path alone must leave room for words
            raise ValueError(f"heading {' > '.join(heading_path)!r} alone is over the {budget}-token budget")
        self.target = max(1.0, (budget - self.base) / share)

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

    def chunks(self, blocks: list[Block]) -> list[_Chunk]:
        """The chunks of a section body; one (anchored "0") when it fits, else anchored by
        the fingerprint of their first piece's words ("~2", "~3" on a repeat)."""
        body = "\n\n".join(b.text for b in blocks)
        if self.fits(body):
            return [_Chunk(body, "0")]
        pieces: list[Piece] = []
        fps: list[int] = []  # markup-only edits move no cut
        for i, block in enumerate(blocks):
            for p in self._block_pieces(block, i):  # each piece counted as it is cut
                pieces.append(p)
                fps.append(words(p))  # its words read while they are the last ones counted
        sizes, header = [], []  # tokens of each piece in a chunk; of its header, if it starts one
        for i, p in enumerate(pieces):
            own = self.count(p.opening(None)) - self.base + 1
            repeated = self.count(p.header) - self.base + 1 if p.header and pieces[i - 1].table == p.table else 0
            sizes.append(max(1, own - repeated))
            header.append(repeated)

        def fits(start: int, end: int) -> bool:  # estimated
            return self.base + header[start] + sum(sizes[start:end]) <= self.budget

        cuts: list[tuple[int, int]] = []
        for a, b in spans(fps, sizes, fits, self.target, self.target / 2):
            cuts += [(a, b)] if self.fits(render(pieces[a:b])) else self._exact(pieces, a, b)
        out: list[_Chunk] = []
        seen: Counter[str] = Counter()
        for a, b in cuts:
            name = anchor(fps[a])
            seen[name] += 1
            out.append(_Chunk(render(pieces[a:b]), name if seen[name] == 1 else f"{name}~{seen[name]}"))
        return out

    def _exact(self, pieces: list[Piece], start: int, end: int) -> list[tuple[int, int]]:
        """Pieces [start, end) cut into the longest runs that fit, counted exactly."""
        out: list[tuple[int, int]] = []
        a = start
        for i in range(start + 1, end):
            if not self.fits(render(pieces[a : i + 1])):
                out.append((a, i))
                a = i
        return [*out, (a, end)]

    def _block_pieces(self, block: Block, index: int) -> Iterator[Piece]:
        """A block's pieces: a table over the target by rows (each knowing its header), a
        list over it by items, anything else whole when it fits, else cut (`_pieces`)."""
        text = block.text
        if block.kind == "code" or self.count(text) - self.base <= self.target:
            yield from self._pieces(text)
        elif (table := table_rows(text)) is not None and self.fits(table[0]):
            head, rows = table
            for i, row in enumerate(rows):
                if self.fits(f"{head}\n{row}"):
                    yield Piece(row, "\n\n" if i == 0 else "\n", head, index)
                else:  # a row alone over the budget: read as text
                    yield from self._pieces(row, "\n\n" if i == 0 else "\n")
        elif (items := list_items(text)) is not None:
            for i, item in enumerate(items):
                yield from self._pieces(item, "\n\n" if i == 0 else "\n")
        else:
            yield from self._pieces(text)

    def _pieces(self, text: str, joiner: str = "\n\n", level: int = 0) -> Iterator[Piece]:
        """`text` whole if it fits, else cut at the next finer boundary: lines, sentences,
        then token windows. The separators cut at become the pieces' joiners."""
        if self.fits(text):
            yield Piece(text, joiner)
        elif level == len(_SPLITS):
            for i, window in enumerate(self._windows(text)):
                yield Piece(window, joiner if i == 0 else " ")
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
    target_share: int = TARGET_SHARE,
) -> list[Section]:
    """The sections of one page's normalized markdown, each chunk's retrieval text at most
    `budget` tokens as `count` measures them (default: `encoding`, a tiktoken encoding); a
    long section is cut into runs of about `budget / target_share` tokens.

    `url` must be the page's normalized URL: it is part of every key. `page_date` (the
    page's declared date) and `title` are payload: they never change what is embedded.
    """
    if budget < 8:
        raise ValueError(f"budget must be at least 8 tokens, got {budget}")
    if target_share < 1:
        raise ValueError(f"target_share must be at least 1, got {target_share}")
    count = count or tiktoken_counter(encoding)
    out: list[Section] = []
    ordinal = 0
    for path, blocks in _sections(markdown) or _headings_only(markdown):
        blocks = [b for b in blocks if b.text.strip()]
        if not blocks:
            continue
        key = section_key(url, path)
        chunker = _Chunker(budget, count, path, target_share)
        for index, chunk in enumerate(chunker.chunks(blocks)):
            text = chunk.text
            embed_text, tokens = chunker.measure(text)
            out.append(
                Section(
                    key=key,
                    chunk_index=index,
                    anchor=chunk.anchor,
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
