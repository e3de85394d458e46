"""The markdown-it parsers of the text core, made when first used: the settings import
the core, and most commands (status, a quiet run) parse no markdown at all."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["block_parser", "parser"]


@cache
def parser() -> MarkdownIt:
    """CommonMark with tables; html: True so that inline tags become html tokens instead of
    literal text."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table")


@cache
def block_parser() -> MarkdownIt:
    """The same, block rules only: no inline parsing."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").disable(["inline", "text_join"])
