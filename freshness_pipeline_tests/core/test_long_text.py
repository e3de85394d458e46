"""Every function of `core/` that reads page text does work linear in it, on long tokens,
long lines and long code blocks (issue 52, item 7).

Work is counted, never timed: the Python calls a page's processing makes (markdown-it,
trafilatura and the rules are Python) on a text of n and of 2n characters; a quadratic
loop would make four times as many, and no text may cost more than a bound per character.
A regex does its work inside one call, so each one that reads page text is linear by
construction (no nested or overlapping quantifiers), and those rewritten for it are
checked against the regexes they replace on small inputs."""

from __future__ import annotations

import html
import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from freshness_pipeline.core import retrieval
from freshness_pipeline.core.blocks import code_spans
from freshness_pipeline.core.fingerprint import fuzzy_unchanged, simhash
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.observe import near_empty_key
from freshness_pipeline.core.responses import _words, looks_soft_404, text_shape, text_sketch
from freshness_pipeline.core.retrieval import _parsed_text, plain_text
from freshness_pipeline.core.segment import segment
from freshness_pipeline.pipeline.workers import ExtractJob, extract_one

URL = "https://docs.example.com/guide/long/"
N = 50_000  # and 2N = 100,000 characters
# Calls per character of text: ~50 on escape-dense lines of short words; an escape rule
# rendering a long block once per kind of escape tried makes 170 on a token of `\\`.
CALLS_PER_CHAR = 100

# Characters the rules and markdown react to; never a space, and never `/` (the old
# quadratic `\S*/\S*` backtracked on a run without one).
UNITS = st.text(alphabet="a1_*`\\[]()<>#-:.|!~'\"’“”—&;=@", min_size=1, max_size=6)


def page(shape: str, unit: str, size: int) -> str:
    """A page holding `size` characters of text in one token, one line or one code block."""
    if shape == "token":
        body = f"<p>Data: {html.escape((unit * (size // len(unit) + 1))[:size])}</p>"
    elif shape == "line":
        body = f"<p>{html.escape(((unit + ' ') * (size // (len(unit) + 1) + 1))[:size])}</p>"
    else:
        lines = "\n".join([unit] * (size // (len(unit) + 1) + 1))[:size]
        body = f"<pre><code>{html.escape(lines)}</code></pre>"
    return f"<html><head><title>Long</title></head><body><main><h1>Long</h1>{body}</main></body></html>"


def process(html_page: str) -> object:
    """What the crawl and the sections stage do with one page's text."""
    text = extract_one(ExtractJob(URL, html_page, ()))
    assert text.error is None
    md = text.markdown
    sections = segment(URL, md, page_date=None, title="Long", budget=400, count=lambda s: len(s.split()))
    for s in sections[:3]:
        fuzzy_unchanged(s.embed_text, s.embed_text + " x", s.simhash, simhash(s.embed_text + " x"), 3)
    return (
        len(md),
        len(sections),
        text_shape(md),
        text_sketch(md),
        simhash(md),
        near_empty_key(md, URL, ()),
        looks_soft_404("Long", md, min_chars=200, had_chars=len(md)),
    )


def calls(fn: Callable[[], object]) -> int:
    """The Python and builtin calls `fn` makes."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(shape=st.sampled_from(["token", "line", "code"]), unit=UNITS)
def test_processing_a_page_is_linear_in_its_text(shape: str, unit: str) -> None:
    process(page(shape, unit, N // 10))  # modules loaded, caches warm
    small = calls(lambda: process(page(shape, unit, N)))
    large = calls(lambda: process(page(shape, unit, 2 * N)))
    assert large <= 2.5 * small + 10_000, (shape, unit, small, large)  # linear...
    assert large <= CALLS_PER_CHAR * 2 * N, (shape, unit, large)  # ... and no rule redoing the text


def test_a_100k_token_is_read_whole() -> None:
    token = "a1b2c3d4" * 12_500
    md = extract_one(ExtractJob(URL, page("token", token, len(token)), ())).markdown
    assert token in md and _words(md) == ["#", "long", "data:", token]


_URLISH = re.compile(r"\S*/\S*")  # what `_words` replaced: quadratic on a long token without `/`


@given(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=60) | st.text(alphabet="ab/ \t\n\u00a0\u2003", max_size=60)
)
def test_words_are_what_the_old_regex_left(text: str) -> None:
    assert _words(text) == _URLISH.sub(" ", text.casefold()).split()


# Code spans as CommonMark reads them within a line, as a regex (possessive runs): the
# reference `code_spans` finds without one.
_CODE_SPAN = re.compile(r"(?<!`)(`++)(?!`).+?(?<!`)\1(?!`)")


@given(st.text(alphabet="`a \n", max_size=40))
def test_code_spans_are_the_runs_that_close(text: str) -> None:
    assert code_spans(text) == [m.span() for m in _CODE_SPAN.finditer(text)]


def test_a_long_line_saying_built_with_is_no_build_line() -> None:
    """Only a short line is a build footer: the rule that strips its numbers rescans a
    token from each character (a 20,000-character token took it over a minute)."""
    footer = "Built with mkdocs 1.6.1 on 2026-06-03 (build #4012)"
    assert normalize(footer, url=URL) == "Built with mkdocs on (build )"
    prose = "Built with care: " + "release v2 adds 3 modes. " * 20
    assert normalize(prose, url=URL) == prose.strip()
    assert normalize(prose + "x" * 100_000, url=URL) == prose + "x" * 100_000


# Text read as written (`retrieval._CODE_LINE`, `_BLOCK_MARK`, `_INLINE_MARK`) against the
# parse it skips: every character a rule may read, at line starts, in words and alone.
_MARKS = "aZ1_ \t\n\r\x00\x0b\x0c\x1c\x85\u00a0\u2028\u3000*`\\[]()<>#-+=:.|!~&;'\"é"
_PARTS = ["a", "x_1", "a_b", "_a", "a_", "__", " ", "    ", "\t", "\n", "\n\n", "1.", "2)", "=", "-", "+", "#", ">"]
_PARTS += ["~", "|", "*", "`", "[", "]", "<", "&amp;", "\\", "\r", "\x00", "\x0c", "\u00a0", "(x)", ":", "!"]


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=_MARKS, max_size=30) | st.lists(st.sampled_from(_PARTS), max_size=12).map("".join))
def test_text_read_as_written_has_the_words_the_parse_gives(text: str) -> None:
    assert plain_text(text) == _parsed_text(text)


def long_markdown(shape: str, unit: str, size: int) -> str:
    """A section of `size` characters in one token, one line or one code block."""
    if shape == "token":
        body = "Data: " + (unit * (size // len(unit) + 1))[:size]
    elif shape == "line":
        body = ((unit + " ") * (size // (len(unit) + 1) + 1))[:size]
    else:
        body = "```\n" + "\n".join([unit] * (size // (len(unit) + 1) + 1))[:size] + "\n```"
    return f"# Long\n\n{body}\n"


def segment_work(markdown: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    """(markdown parses, token counts, chunks) of segmenting `markdown`."""
    parses, counts = 0, 0
    parsed = retrieval._parsed_text

    def parse(text: str) -> str:
        nonlocal parses
        parses += 1
        return parsed(text)

    def count(text: str) -> int:
        nonlocal counts
        counts += 1
        return len(text) // 4 + 1

    with monkeypatch.context() as m:
        m.setattr(retrieval, "_parsed_text", parse)
        retrieval.plain_text.cache_clear()
        chunks = len(segment(URL, markdown, budget=400, count=count))
    return parses, counts, chunks


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(shape=st.sampled_from(["token", "line", "code"]), unit=UNITS)
def test_segmenting_parses_each_text_it_measures_once(shape: str, unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece's words are read once for its size and its fingerprint, and the counts grow
    with the text: 100,000 characters cost twice what 50,000 do."""
    small = segment_work(long_markdown(shape, unit, N), monkeypatch)
    parses, counts, chunks = segment_work(long_markdown(shape, unit, 2 * N), monkeypatch)
    assert parses <= counts, (shape, unit, parses, counts)
    assert counts <= 2.5 * small[1] + 10 and chunks <= 2.5 * small[2] + 2, (shape, unit, small, counts, chunks)


@pytest.mark.parametrize(
    ("shape", "unit"), [("token", "a1b2c3d4"), ("line", "timeout"), ("code", "value_1 = compute(i, 2) + 1")]
)
def test_long_text_without_markup_is_measured_without_a_parse_per_piece(
    shape: str, unit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100,000 characters of words, windows of a token or code lines are read as written:
    only the texts holding the fence (the block, its first and last chunks) are parsed."""
    parses, counts, chunks = segment_work(long_markdown(shape, unit, 2 * N), monkeypatch)
    assert chunks > 50 and parses <= 6, (shape, parses, counts, chunks)
