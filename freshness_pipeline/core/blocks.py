"""The block structure of markdown as CommonMark reads it: which lines are code, which are
headings, and the blocks a page is split into. Read with the retrieval text's options
(`core/retrieval.py`), so a line is code here exactly when it is code there.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .markdown import block_parser

__all__ = ["Block", "Structure", "code_spans", "split_blocks", "structure"]


@dataclass(frozen=True, slots=True)
class Block:
    """Lines of markdown as written: a heading, a code block, or a run of other lines."""

    text: str
    kind: Literal["heading", "code", "text"]
    level: int = 0  # a heading's, 1 to 6
    inline: str = ""  # a heading's inline markdown: no `#`s, no underline


@dataclass(frozen=True, slots=True)
class Structure:
    """A text's lines and what CommonMark makes of them."""

    lines: tuple[str, ...]
    code: tuple[bool, ...]  # per line: in a fenced or indented code block (at any depth)
    # first line -> (line after it, heading level or 0 for code, heading's inline markdown)
    # of every top-level heading and every code block outside a block quote: the blocks that
    # stand on their own lines
    apart: Mapping[int, tuple[int, int, str]]


@functools.lru_cache(maxsize=4)  # `normalize` and then `segment` split the same text
def structure(markdown: str) -> Structure:
    """The structure of `markdown` (its line ends read as LF), from one parse; the last few
    are kept."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    code = [False] * len(lines)
    apart: dict[int, tuple[int, int, str]] = {}
    quotes = 0
    tokens = block_parser().parse(markdown)
    for i, tok in enumerate(tokens):
        if tok.type in ("blockquote_open", "blockquote_close"):
            quotes += tok.nesting
        elif tok.map is None:
            continue
        elif tok.type in ("fence", "code_block"):
            start, end = tok.map
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1  # the blank lines an unclosed fence ends with: none of its text
            code[start:end] = [True] * (end - start)
            if not quotes:
                apart[start] = (end, 0, "")
        elif tok.type == "heading_open" and tok.level == 0:
            apart[tok.map[0]] = (tok.map[1], int(tok.tag[1:]), tokens[i + 1].content)
    return Structure(tuple(lines), tuple(code), apart)


def split_blocks(markdown: str) -> list[Block]:
    """Headings and code blocks (outside block quotes) each one block, the other lines in
    blank-line separated blocks."""
    s = structure(markdown)
    blocks: list[Block] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            blocks.append(Block("\n".join(current), "text"))
            current.clear()

    i = 0
    while i < len(s.lines):
        if i in s.apart:
            flush()
            end, level, inline = s.apart[i]
            blocks.append(Block("\n".join(s.lines[i:end]), "heading" if level else "code", level, inline))
            i = end
            continue
        if s.lines[i].strip():
            current.append(s.lines[i])
        else:
            flush()
        i += 1
    flush()
    return blocks


_BACKTICKS = re.compile(r"`+")


def code_spans(text: str) -> list[tuple[int, int]]:
    """The code spans of `text` as (start, end), in order: on one line, a whole run of
    backticks closed by the next whole run as long (CommonMark). Found from the runs with
    one lookup each, never by a regex that backtracks: O(n log n) on any line."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in text.split("\n"):
        runs = [m.span() for m in _BACKTICKS.finditer(line)]
        by_length: dict[int, list[int]] = {}
        for i, (a, b) in enumerate(runs):
            by_length.setdefault(b - a, []).append(i)
        i = 0
        while i < len(runs):
            a, b = runs[i]
            same = by_length[b - a]
            j = bisect_right(same, i)
            if j < len(same):
                spans.append((offset + a, offset + runs[same[j]][1]))
                i = same[j] + 1
            else:
                i += 1
        offset += len(line) + 1
    return spans
