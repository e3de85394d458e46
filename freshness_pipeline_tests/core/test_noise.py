from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.blocks import split_blocks
from freshness_pipeline.core.noise import (
    RULES,
    block_fingerprint,
    learn_template_blocks,
    normalize,
)
from freshness_pipeline.core.segment import segment
from freshness_pipeline_tests.core.pages import VOCAB, Page, pages

URL = "https://docs.example.com/guide/install/"


def rule(name: str, markdown: str, url: str = URL) -> str:
    return RULES[name].apply(markdown, url)


# --- each rule by name --------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "Last updated: June 3, 2026",
        "*Last updated on 2026-06-03T10:22:01Z*",
        "Last modified 3 days ago",
        "Page last edited on 3 June 2026, at 10:22.",
        "This page was last updated on Mon, Jun 3, 2026.",
        "Updated on 06/03/2026",
        "Last update: yesterday",
    ],
)
def test_last_updated_drops_the_line(line: str) -> None:
    assert rule("last_updated", f"Intro.\n{line}\nOutro.") == "Intro.\nOutro."


@pytest.mark.parametrize(
    "prose",
    [
        "Updated the API in version 2.",
        "We updated on 3 servers at once.",
        "The cache is updated every 5 minutes.",
        "Modified requests are retried.",
        "Last updated field holds a date.",
    ],
)
def test_last_updated_keeps_prose(prose: str) -> None:
    assert rule("last_updated", prose) == prose


def test_last_updated_keeps_the_rest_of_a_line() -> None:
    assert rule("last_updated", "Edit this page · Last updated: June 3, 2026") == "Edit this page · "


def test_relative_time() -> None:
    assert rule("relative_time", "Posted 3 days ago by Ann, edited an hour ago.") == "Posted  by Ann, edited ."
    assert rule("relative_time", "Built yesterday, just now.") == "Built , ."
    assert rule("relative_time", "Tokens expire in 3 days.") == "Tokens expire in 3 days."


def test_build_stamp() -> None:
    assert rule("build_stamp", "Built with MkDocs at 2026-06-03 10:22:01 UTC") == "Built with MkDocs at "
    assert rule("build_stamp", "Generated on Mon, 3 June 2026 at 10:00 by Sphinx 7.2.6.") == (
        "Generated on  by Sphinx "
    )
    assert rule("build_stamp", "Build: fadedcafe · build #12 · Rendered in 12ms") == "Build:  · build  · Rendered in "
    assert rule("build_stamp", "© 2019-2026 Encode OSS Ltd.") == "© Encode OSS Ltd."
    assert rule("build_stamp", "Copyright 2026, Acme") == "Copyright Acme"
    # Prose with numbers and ids is not a build stamp.
    for prose in ("Build 2 wheels with 8 cores.", "Each request gets an id like 3f2a9c1e8b.", "Released in 2026."):
        assert rule("build_stamp", prose) == prose


def test_escapes() -> None:
    escaped = r"Set max\_retries to a\*b and use `a\_b`."
    assert rule("escapes", escaped) == r"Set max_retries to a*b and use `a\_b`."
    # Literal stars around a word: without their escapes they would be emphasis.
    assert rule("escapes", r"Set it to \*all\*.") == r"Set it to \*all\*."
    assert rule("escapes", "```\nx = a\\_b\n```") == "```\nx = a\\_b\n```"
    assert rule("escapes", r"\# not a heading") == r"\# not a heading"


@pytest.mark.parametrize(
    ("escaped", "clean"),
    [
        (r"pip install acme-widgets\[postgres\] now", "pip install acme-widgets[postgres] now"),
        (r"a \<tag> stays, a\~b and 1\. and \(x\) go", r"a \<tag> stays, a~b and 1. and (x) go"),
        (r"\[x\](y) would be a link", r"\[x\](y) would be a link"),
        ("| a | b |\n|---|---|\n| x\\[1\\] | a\\|b |", "| a | b |\n|---|---|\n| x[1] | a\\|b |"),
        (r"`a\[b\]` is code", r"`a\[b\]` is code"),
    ],
)
def test_only_the_escapes_markdown_needs_stay(escaped: str, clean: str) -> None:
    assert rule("escapes", escaped) == clean


def test_tracking_params() -> None:
    md = "See [setup](https://x.org/a?utm_source=n&v=2#s), <https://x.org/?fbclid=1> and [r](/a?ref=hn)."
    assert rule("tracking_params", md) == "See [setup](https://x.org/a?v=2#s), <https://x.org/> and [r](/a)."


def test_relative_links() -> None:
    md = '[a](setup/) [b](../api/#client "Client") [c](/abs) [d](#frag) [e](mailto:x@y.z) [f](https://o.org/x)'
    assert rule("relative_links", md) == (
        "[a](https://docs.example.com/guide/install/setup/) "
        '[b](https://docs.example.com/guide/api/#client "Client") '
        "[c](https://docs.example.com/abs) [d](https://docs.example.com/guide/install/#frag) "
        "[e](mailto:x@y.z) [f](https://o.org/x)"
    )


def test_whitespace() -> None:
    md = "\r\n\n# Title  \r\n\n\n\nSome\u00a0  text\t here.   \n  - nested  item\n\n\n```\ncode    stays  \n\n\n```\n\n"
    assert rule("whitespace", md) == "# Title\n\nSome text here.\n  - nested item\n\n```\ncode    stays\n\n\n```"
    assert rule("whitespace", "zero\u200bwidth") == "zerowidth"


CODE = "# Last updated: 2024-01-01, 3 days ago\nBuilt with x at 10:22 [l](rel?utm_source=1)\na  \\_b    c"


@pytest.mark.parametrize(
    "page",
    [
        "```\n{code}\n```",
        "~~~ sh\n```\n{code}\n~~~",
        "````\n```\n{code}\n```\n````",
        "Text.\n\n    {indented}",
        "1. Install:\n\n    ```\n    {indented}\n    ```",
        "> ```\n> {quoted}\n> ```",
    ],
)
def test_rules_leave_code_blocks_alone(page: str) -> None:
    """Fenced (either fence, in a list item, in a block quote) or indented."""
    md = page.format(
        code=CODE,
        indented=CODE.replace("\n", "\n    "),
        quoted=CODE.replace("\n", "\n> "),
    )
    assert normalize(md, url=URL) == md


def test_code_blocks_stand_apart_but_not_in_block_quotes() -> None:
    """A blank line before and after a code block, in a list item too; none inside a block
    quote, where it would end the quote."""
    item = "- Install:\n  ```\n  pip install x\n  ```\n  Then run it."
    assert normalize(item, url=URL) == "- Install:\n\n  ```\n  pip install x\n  ```\n\n  Then run it."
    quote = "> Install:\n> ```\n> pip install x\n> ```\n> Then run it."
    assert normalize(quote, url=URL) == quote


# --- normalize ------------------------------------------------------------------------------


def test_disabled_rules_are_skipped() -> None:
    md = "Text  here.\n\nLast updated: June 3, 2026"
    assert normalize(md, url=URL) == "Text here."
    assert normalize(md, url=URL, disabled=["last_updated"]) == "Text here.\n\nLast updated: June 3, 2026"
    assert normalize(md, url=URL, disabled=["whitespace"]) == "Text  here.\n"
    assert normalize(md, url=URL, disabled=RULES.keys()) == md


def test_unknown_rule_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="no_such_rule"):
        normalize("x", url=URL, disabled=["whitespace", "no_such_rule"])


def test_template_blocks_are_removed_but_not_headings() -> None:
    pages = [f"# Page {w}\n\nOwn text {w} here.\n\nCookie settings · manage" for w in VOCAB[:6]]
    learned = learn_template_blocks(pages, share=0.6)
    assert learned == {
        block_fingerprint("Cookie settings · manage", "end 0"),
        block_fingerprint("cookie  SETTINGS · manage", "top 2"),
    }
    assert normalize(pages[0], url=URL, template_blocks=learned) == "# Page the\n\nOwn text the here."
    # A heading on every page is never template; too few pages teach nothing.
    assert learn_template_blocks(["# Same\n\nx 1", "# Same\n\ny 2"] * 3, share=0.4) == {
        block_fingerprint(text, where) for text in ("x 1", "y 2") for where in ("top 1", "end 0")
    }
    assert learn_template_blocks(pages[:4], share=0.6) == frozenset()


def test_only_the_same_text_at_the_same_place_and_no_code_is_template() -> None:
    """A block differing between pages (a digit), one at another place, or one holding code
    (a one-line install command, extracted as inline code) is content, however often it
    repeats."""
    numbered = [f'# P{i}\n\nOwn text {w}.\n\n`pip install "acme[extra{i}]"`' for i, w in enumerate(VOCAB[:8])]
    code = [f"# P{i}\n\nOwn text {w}.\n\nInstall with `pip install acme`." for i, w in enumerate(VOCAB[:8])]
    counter = [f"# P{i}\n\nOwn text {w}.\n\nServed by node {i}." for i, w in enumerate(VOCAB[:8])]
    moving = [
        "\n\n".join([f"# P{i}", *[f"Own text {w}."] * (i % 3), "Join the forum.", *[f"More {w}."] * ((i + 1) % 3)])
        for i, w in enumerate(VOCAB[:9])
    ]
    for site in (numbered, code, counter, moving):
        assert learn_template_blocks(site, share=0.6) == frozenset(), site[0]
    footer = [p + "\n\nJoin the forum." for p in moving]  # and at the end of every page
    learned = learn_template_blocks(footer, share=0.6)
    assert block_fingerprint("Join the forum.", "end 0") in learned
    assert normalize(footer[1], url=URL, template_blocks=learned) == moving[1]  # the other one stays


def test_a_learned_block_stays_until_under_half_the_share() -> None:
    banner = "Join our community forum today."
    pages = [f"# P{i}\n\nOwn text {w}.\n\n{banner if i < 4 else 'Plain words.'}" for i, w in enumerate(VOCAB[:10])]
    fp = block_fingerprint(banner, "end 0")
    assert fp not in learn_template_blocks(pages, share=0.6)  # on 4 of 10 pages: not template
    assert fp in learn_template_blocks(pages, share=0.6, keep={fp})  # learned before, still over 30%
    assert fp not in learn_template_blocks(pages[:2] + pages[4:], share=0.6, keep={fp})  # 2 of 8: gone


# --- the property: page noise never changes a section hash -------------------------------

MONTHS = ["January", "June", "Sep", "December"]


def _noise(kind: str, rng: random.Random) -> str:
    y, m, d = rng.randint(2019, 2030), rng.randint(1, 12), rng.randint(1, 28)
    h, mi = rng.randint(0, 23), rng.randint(0, 59)
    when = rng.choice(
        [
            f"{y}-{m:02d}-{d:02d}",
            f"{rng.choice(MONTHS)} {d}, {y}",
            f"{d} {rng.choice(MONTHS)} {y}",
            f"{y}-{m:02d}-{d:02d}T{h:02d}:{mi:02d}:00Z",
            f"{rng.randint(2, 59)} minutes ago",
            "yesterday",
        ]
    )
    return {
        "updated": f"*Last updated: {when}*",
        "relative": f"Posted {rng.randint(2, 30)} days ago by the docs team.",
        "build": f"Built with MkDocs at {y}-{m:02d}-{d:02d} {h:02d}:{mi:02d}, build {rng.getrandbits(40):010x}",
        "copyright": f"Copyright © {y - rng.randint(1, 9)}-{y} Acme Corp.",
        "template": "Cookie settings · manage your preferences",
    }[kind]


def _render(page: Page, noise: list[tuple[int, str]], rng: random.Random) -> str:
    blocks = page.blocks()
    for pos, kind in sorted(noise, reverse=True):
        blocks.insert(min(pos, len(blocks)), _noise(kind, rng))
    blocks.append(_noise("template", rng))
    out = []
    for block in blocks:  # whitespace noise: doubled spaces, trailing spaces, blank lines
        block = "".join(c + " " if c == " " and rng.random() < 0.2 else c for c in block)
        out.append(block + " " * rng.randint(0, 3))
    text = "".join(b + "\n" * rng.randint(2, 4) for b in out)
    return text.replace("\n", "\r\n") if rng.random() < 0.3 else text


@settings(max_examples=30, deadline=None)
@given(
    pages(),
    st.lists(
        st.tuples(st.integers(1, 30), st.sampled_from(["updated", "relative", "build", "copyright"])),
        max_size=5,
    ),
    st.randoms(use_true_random=False),
)
def test_noise_never_changes_a_section_hash(page: Page, noise: list[tuple[int, str]], rng: random.Random) -> None:
    renders = [_render(page, noise, rng) for _ in range(2)]
    others = [_render(Page(f"Other {w}", (f"Unique text {w}.",), ()), [], rng) for w in VOCAB[:4]]
    site = [normalize(md, url=URL) for md in renders + others]
    templates = learn_template_blocks(site, share=0.6)

    def sections(md: str) -> list[tuple[str, int, str]]:
        clean = normalize(md, url=URL, template_blocks=templates)
        return [(s.key, s.chunk_index, s.content_hash) for s in segment(URL, clean, page_date="2026-06")]

    first, second = (sections(md) for md in renders)
    assert first == second
    if all(kind == "updated" for _, kind in noise):  # these, and the template, leave no trace at all
        assert first == sections(page.markdown())


@settings(max_examples=30, deadline=None)
@given(
    pages(),
    st.lists(st.tuples(st.integers(1, 30), st.sampled_from(["updated", "relative", "build", "copyright"]))),
    st.randoms(use_true_random=False),
)
def test_normalize_is_idempotent(page: Page, noise: list[tuple[int, str]], rng: random.Random) -> None:
    once = normalize(_render(page, noise, rng), url=URL)
    assert normalize(once, url=URL) == once


# Pieces of markdown whose mixes make code blocks, headings, lists, quotes, html blocks and
# tables of every kind, and the lines the rules edit.
MARKDOWN_PIECES = st.sampled_from(
    ["\n", "\n\n", "# ", "## ", "```", "~~~", "````", "    ", "  ", "- ", "1. ", "> ", "===", "---", "text"]
    + ["<div>", "</div>", "<pre>", "</pre>", "<!--", "-->", "|a|b|\n|-|-|", "\t", "`c`", "\u200b", "[x]: /url"]
    + ["Last updated: June 3, 2026", "Built with X at 10:22", "3 days ago", "[l](rel?utm_source=1)", "a  b"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(MARKDOWN_PIECES, max_size=40).map("".join))
def test_any_markdown_normalizes_once_and_keeps_every_section_citable(markdown: str) -> None:
    """Idempotent, and every section's text is found in the page's text, whatever the
    rules' edits make code (a line left indented by a date that went) or reveal as code
    (a fence behind an invisible character)."""
    once = normalize(markdown, url=URL)
    assert normalize(once, url=URL) == once
    if any(b.kind != "heading" for b in split_blocks(once)):  # headings only: joined by blank lines
        assert all(s.text in once for s in segment(URL, once))
