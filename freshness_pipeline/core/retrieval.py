"""Retrieval text: what the embedder sees of a section, and nothing a reader needs besides.

The heading path, then the body's words: link targets, image URLs and markdown markup
removed (anchor and alt text kept), whitespace normalized. No dates, no chrome. Its hash
alone decides whether a section is embedded; everything else (the markdown with its
links, title, `as_of`, URL) is payload, updated without an embedding call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from .markdown import parser

if TYPE_CHECKING:
    from markdown_it.token import Token

__all__ = ["code_parts", "inline_text", "plain_text", "retrieval_text"]

_NAMESAKE = re.compile(r" \[\d+\]$")  # " [2]" that segment adds to a repeated heading

# Text whose words CommonMark reads as they are written, so that a long code block's lines
# and a long line's windows are measured without a parse each: one line of indented code,
# or paragraph lines alone. A paragraph line is none blank, indented as code, or opening a
# block (heading, quote, list, rule, setext underline, fence, HTML, link reference), and
# holds no character an inline rule reads (escape, code, emphasis, link, HTML, entity; an
# underscore inside a word is none) and no table pipe. Neither holds what `normalize`
# rewrites (a carriage return, NUL).
_CODE_LINE = re.compile(r"(?: {0,3}\t| {4})[^\n\r\x00]*")
_BLOCK_MARK = re.compile(r"^(?: {0,3}(?:[\t#>*+\-=_`~<\[]|\d+[.)])| {4}|[ \t]*$)", re.MULTILINE)
_INLINE_MARK = re.compile(r"[\\`*\[\]<&|~\r\x00]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _inline(children: Sequence[Token] | None) -> str:
    out: list[str] = []
    for tok in children or ():
        if tok.type in ("text", "code_inline"):
            out.append(tok.content)
        elif tok.type == "image":
            out.append(_inline(tok.children))  # the alt text, never the URL
        elif tok.type in ("softbreak", "hardbreak"):
            out.append(" ")
        # link_open/link_close (the target), emphasis markers and html_inline add nothing
    return "".join(out)


@lru_cache(maxsize=4)  # a piece's words: read for its size, then for its fingerprint
def plain_text(markdown: str) -> str:
    """The words of `markdown`, one line per block, single spaces within a block."""
    if _CODE_LINE.fullmatch(markdown) or (_BLOCK_MARK.search(markdown) or _INLINE_MARK.search(markdown)) is None:
        return " ".join(markdown.split())  # what the parse below makes of it
    return _parsed_text(markdown)


def _parsed_text(markdown: str) -> str:
    blocks: list[str] = []
    for tok in parser().parse(markdown):
        if tok.type == "inline":
            text = _inline(tok.children)
        elif tok.type in ("fence", "code_block"):
            text = tok.content
        else:
            continue
        if words := " ".join(text.split()):
            blocks.append(words)
    return "\n".join(blocks)


def inline_text(markdown: str) -> str:
    """The words of inline markdown (a heading's text), single spaces."""
    return " ".join(_inline(parser().parseInline(markdown)[0].children).split())


def code_parts(markdown: str) -> tuple[str, ...]:
    """The code of `markdown`, in order: each code span's and each code block's content,
    exactly as written (a command's every character can matter)."""
    out: list[str] = []
    for tok in parser().parse(markdown):
        if tok.type in ("fence", "code_block"):
            out.append(tok.content)
        elif tok.type == "inline":
            out += [c.content for c in tok.children or () if c.type == "code_inline"]
    return tuple(out)


def retrieval_text(heading_path: Sequence[str], markdown: str) -> str:
    """Heading path (without namesake counters) and the plain text of the body."""
    heading = " > ".join(_NAMESAKE.sub("", part) for part in heading_path)
    body = plain_text(markdown)
    return f"{heading}\n{body}" if heading and body else heading or body
