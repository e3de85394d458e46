from __future__ import annotations

import pytest

from freshness_pipeline.core.blocks import split_blocks, structure


def _blocks(markdown: str) -> list[tuple[str, str]]:
    return [(b.kind, b.text) for b in split_blocks(markdown)]


def test_split_blocks_keeps_code_and_headings_apart() -> None:
    md = (
        "Para one\nstill one\n## Head\n```\na\n\nb\n```\n~~~\nc\n```\n~~~\n````md\n```\n````\nafter\n\n"
        "    indented\n\n    code\n\nlast"
    )
    assert _blocks(md) == [
        ("text", "Para one\nstill one"),
        ("heading", "## Head"),
        ("code", "```\na\n\nb\n```"),
        ("code", "~~~\nc\n```\n~~~"),  # a fence closes only with its own character
        ("code", "````md\n```\n````"),  # and at least as many of them
        ("text", "after"),
        ("code", "    indented\n\n    code"),
        ("text", "last"),
    ]


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert _blocks("Run:\n```\n# x\n\nmore") == [("text", "Run:"), ("code", "```\n# x\n\nmore")]


@pytest.mark.parametrize(
    ("markdown", "level", "inline"),
    [
        ("# Title", 1, "Title"),
        ("### The `Client` class ###", 3, "The `Client` class"),  # the closing `#`s go
        ("## C# ##", 2, "C#"),
        ("# foo#", 1, "foo#"),  # not a closing sequence: no space before it
        ("   ###### Six", 6, "Six"),
        ("Title\n=====", 1, "Title"),
        ("Sub\ntitle\n---", 2, "Sub\ntitle"),
    ],
)
def test_headings_as_commonmark_reads_them(markdown: str, level: int, inline: str) -> None:
    (block,) = split_blocks(markdown)
    assert (block.kind, block.level, block.inline, block.text) == ("heading", level, inline, markdown)


@pytest.mark.parametrize(
    "markdown",
    [
        "#hashtag",
        "####### seven",
        "    # indented: code",
        "- item\n  # in a list item",
        "> # in a block quote",
        "<div>\n# in an html block\n</div>",
        "```\n# a comment in code\n```",
    ],
)
def test_what_is_not_a_section_heading(markdown: str) -> None:
    assert all(b.kind != "heading" for b in split_blocks(markdown))


def test_code_inside_lists_and_block_quotes() -> None:
    """A fence in a list item is a block of its own; one in a block quote is code, but stays
    in the quote's block (a blank line there would end the quote)."""
    item = "1.  Install it:\n    ```\n    pip install x\n    ```\n2.  Run it."
    assert _blocks(item) == [
        ("text", "1.  Install it:"),
        ("code", "    ```\n    pip install x\n    ```"),
        ("text", "2.  Run it."),
    ]
    quote = "> Run:\n> ```\n> pip install x\n> ```\n> Done."
    assert _blocks(quote) == [("text", quote)]
    assert structure(quote).code == (False, True, True, True, False)
    # Backticks in an html block are no fence.
    assert not any(structure("<div>\n```\n</div>\n\ntext").code)
