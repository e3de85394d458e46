"""Normalization of extracted markdown before it is segmented and hashed.

Each rule is named, can be disabled per source (`NoisePolicy.disabled_rules`) and only
touches prose: code blocks, fenced or indented, as CommonMark reads them (`core/blocks.py`),
pass through untouched (bar trailing whitespace). Rules are conservative: they remove
volatile tokens (dates, relative times, build ids), never words that carry meaning. Bump
`NORMALIZER_VERSION` whenever a rule's output changes: every hash depends on it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from urllib.parse import urljoin

from freshness_pipeline.core.blocks import code_spans, split_blocks, structure
from freshness_pipeline.core.markdown import parser
from freshness_pipeline.core.urls import strip_tracking

__all__ = [
    "NORMALIZER_VERSION",
    "RULES",
    "Rule",
    "block_fingerprint",
    "learn_template_blocks",
    "normalize",
    "strip_template_blocks",
]

# Bump whenever a page's extracted or normalized text, or its fingerprints, would come out
# differently: the next run of every source fetches and extracts every page again and
# re-indexes it. What this version makes: a page's date only as it declares it
# (core/extract.py); the main element's link lists written by core/link_lists.py, <summary>
# a paragraph, a page of headings alone as its headings; code as CommonMark reads it
# (core/blocks.py), never rewritten and standing apart from the text; the escapes markdown
# does not need removed, within a render budget; a template block the same text at the same
# place, never one holding code; typography folded in fingerprints (core/fingerprint.py).
NORMALIZER_VERSION = "6"

# --- lines, each code or not ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Page:
    """Markdown as lines, each known to be code or not, from one parse before the rules:
    they edit the lines outside code and never make a line code or prose."""

    lines: list[str]
    code: list[bool]

    @classmethod
    def parse(cls, markdown: str) -> _Page:
        s = structure(markdown)
        return cls(list(s.lines), list(s.code))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _blank_lines_around_code(markdown: str) -> _Page:
    """A blank line before every code block that stands on its own lines and after it
    (where a block ends or starts anyway: no line becomes code or prose). `split_blocks`
    makes each one a block of its own, and a section's text joins its blocks with a blank
    line: the page's text must hold every section's text as written, for its citation
    offsets."""
    s = structure(markdown)
    edges = {i for start, (end, level, _) in s.apart.items() if not level for i in (start, end)}
    out = _Page([], [])
    for i, (line, code) in enumerate(zip(s.lines, s.code, strict=True)):
        if i in edges and line.strip() and out.lines and out.lines[-1].strip():
            out.lines.append("")
            out.code.append(False)
        out.lines.append(line)
        out.code.append(code)
    return out


def _map_prose_blocks(page: _Page, fn: Callable[[str], str]) -> _Page:
    """Apply `fn` to every block of consecutive non-blank lines outside code."""
    out = _Page([], [])
    block: list[str] = []

    def flush() -> None:
        if block:
            new = fn("\n".join(block)).split("\n")
            out.lines.extend(new)
            out.code.extend([False] * len(new))
            block.clear()

    for line, code in zip(page.lines, page.code, strict=True):
        if code or not line.strip():
            flush()
            out.lines.append(line)
            out.code.append(code)
        else:
            block.append(line)
    flush()
    return out


def _map_prose(page: _Page, fn: Callable[[str], str | None]) -> _Page:
    """Apply `fn` to every line outside code; a `None` result drops the line."""
    out = _Page([], [])
    for line, code in zip(page.lines, page.code, strict=True):
        new = line if code else fn(line)
        if new is not None:
            out.lines.append(new)
            out.code.append(code)
    return out


# --- dates and times --------------------------------------------------------------------

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_TIME = (
    r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s*[ap]\.?m\.?)?"
    r"(?:\s*(?:Z|[+-]\d{2}:?\d{2}|(?-i:[A-Z]{2,5})))?"
)
_DATE = (
    r"(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+)?"
    r"(?:\d{4}-\d{1,2}-\d{1,2}(?:[T ]" + _TIME + r")?"
    r"|\d{4}/\d{1,2}/\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}"
    rf"|{_MONTH}\s+{_DAY},?\s+\d{{4}}|{_DAY}\s+(?:of\s+)?{_MONTH},?\s+\d{{4}}|{_MONTH}\s+\d{{4}})"
    rf"(?:,?\s+(?:at\s+)?{_TIME})?"
)
_AGO = (
    r"(?:about\s+|over\s+|almost\s+)?(?:\d+|an?|one|a\s+few|few|several)\s+"
    r"(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)\s+ago"
)
_RELATIVE = rf"(?:{_AGO}|yesterday|just\s+now)"


_WORD = re.compile(r"\w")


# --- rules ----------------------------------------------------------------------------------

_LAST_UPDATED = re.compile(
    r"(?:this\s+page\s+was\s+)?(?:page\s+)?"
    r"\b(?:last\s+(?:updated|modified|edited|changed|reviewed|revised|update)"
    r"|(?:updated|modified|edited|revised)(?:\s+(?:on|at))?)"
    rf"\s*:?\s*(?:on\s+)?(?:{_DATE}|{_RELATIVE}|today)\b\.?",
    re.IGNORECASE,
)


def _last_updated(page: _Page, url: str) -> _Page:
    """ "Last updated: June 3, 2026", "Updated on 2026-06-03", "Last modified 3 days ago"."""

    def line(text: str) -> str | None:
        new = _LAST_UPDATED.sub("", text)
        return None if new != text and not _WORD.search(new) else new

    return _map_prose(page, line)


_RELATIVE_TIME = re.compile(rf"\b{_RELATIVE}\b", re.IGNORECASE)


def _relative_time(page: _Page, url: str) -> _Page:
    """ "3 days ago", "an hour ago", "yesterday", "just now"."""
    return _map_prose(page, lambda line: _RELATIVE_TIME.sub("", line))


_BUILD_LINE = re.compile(
    r"\b(?:built|generated|rendered|compiled|deployed|last\s+build)\s+(?:with|using|by|on|at|in|from)\b"
    r"|\bbuild\s*(?:id|hash|number|no\.?)?\s*[:#]",
    re.IGNORECASE,
)
# A footer's build line is short; a paragraph saying "built with" is not one. The bound
# also keeps `_BUILD_VOLATILE` (which rescans a token from each of its characters) linear.
_BUILD_LINE_MAX = 300
# In a build line: dates, hex ids, and every token holding a digit (times, counters, versions).
_BUILD_VOLATILE = re.compile(rf"{_DATE}|\b[0-9a-f]{{7,64}}\b|[^\s,;()]*\d[^\s,;()]*", re.IGNORECASE)
_COPYRIGHT_YEARS = re.compile(
    r"(©|&copy;|\(c\)|copyright)(\s*)\d{4}(?:\s*(?:[-–—]|to)\s*(?:\d{4}|present|now))?,?\s*",
    re.IGNORECASE,
)


def _build_stamp(page: _Page, url: str) -> _Page:
    """Dates, ids and numbers of build footers ("Built with X at <time>", "Build: <id>"),
    and the relative times their removal leaves ("a b3 days ago": a second pass would take
    "a days ago"); the years of copyright notices ("© 2019-2026 Acme" -> "© Acme")."""

    def line(text: str) -> str:
        text = _COPYRIGHT_YEARS.sub(r"\1\2", text)
        build = len(text) <= _BUILD_LINE_MAX and _BUILD_LINE.search(text)
        return _RELATIVE_TIME.sub("", _BUILD_VOLATILE.sub("", text)) if build else text

    return _map_prose(page, line)


# A backslash before ASCII punctuation: a markdown escape (CommonMark 2.4).
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_MAX_TRIES = 20  # escapes of one character tried one by one; past them, the rest are kept
# Characters a block's tries may render, as a multiple of its length plus a floor: past it,
# the escapes left are kept, so the rule stays linear in the block however many kinds of
# escape it holds. A render of escape-dense text costs ~10 s a MB: a block longer than
# _ESCAPES_MAX_CHARS (no paragraph a person wrote) keeps its escapes untried.
_RENDER_BUDGET = 4
_RENDER_FLOOR = 4_000
_ESCAPES_MAX_CHARS = 20_000
# Delimiters that pair up (emphasis, strikethrough, code, links): one of a pair going would
# leave the other needed (`*all\\*`), so they go all at once or not at all.
_PAIRED = ("*", "_", "~", "`", "[]", "()")


def _escapes(page: _Page, url: str) -> _Page:
    """The backslash escapes markdown does not need (trafilatura escapes every `_`, `*`,
    `[`, `]`, `<`, `~` ... in prose: `acme-widgets\\[postgres\\]`): an escape goes when the
    block renders the same without it, so an escape that keeps `*literal*` from being
    emphasis, or a `|` inside a table cell, stays, and code spans (whose backslashes are
    literal) never change. Each block (blank-line separated, outside code blocks) is
    judged as a whole, the escapes of one character at once, else one at a time (bar
    delimiters that pair up: those all at once or not at all)."""
    return _map_prose_blocks(page, _unneeded_escapes_removed)


def _escape_positions(block: str, chars: str) -> list[int]:
    """Where `block` escapes one of `chars`, outside code spans."""
    spans = code_spans(block)
    starts = [a for a, _ in spans]

    def in_code(at: int) -> bool:
        i = bisect_right(starts, at) - 1
        return i >= 0 and at < spans[i][1]

    return [m.start() for m in _ESCAPE.finditer(block) if m.group(1) in chars and not in_code(m.start())]


def _without(block: str, positions: list[int]) -> str:
    for at in sorted(positions, reverse=True):
        block = block[:at] + block[at + 1 :]
    return block


def _unneeded_escapes_removed(block: str) -> str:
    if "\\" not in block or len(block) > _ESCAPES_MAX_CHARS:
        return block
    rendered = parser().render(block)
    found = dict.fromkeys(m.group(1) for m in _ESCAPE.finditer(block))
    classes = [c for c in _PAIRED if any(ch in found for ch in c)]
    classes += [ch for ch in found if not any(ch in c for c in _PAIRED)]
    budget = _RENDER_BUDGET * len(block) + _RENDER_FLOOR

    def renders_same(candidate: str) -> bool | None:
        """Whether `candidate` renders as the block does; None once the budget is spent."""
        nonlocal budget
        budget -= len(candidate)
        return None if budget < 0 else parser().render(candidate) == rendered

    for chars in classes:
        at = _escape_positions(block, chars)
        if not at:
            continue
        if (same := renders_same(_without(block, at))) is None:
            break
        if same:
            block = _without(block, at)
        elif chars not in _PAIRED:
            for i in reversed(at[:_MAX_TRIES]):  # one at a time, from the end: no index moves
                if (same := renders_same(candidate := _without(block, [i]))) is None:
                    return block
                if same:
                    block = candidate
    return block


# `[text](target "title")` and `<https://autolink>`
_LINK_TARGET = re.compile(r"(?<=\]\()(\s*<?)([^)\s>]+)|(?<=<)(https?://[^>\s]+)(?=>)")


def _map_link_targets(page: _Page, fn: Callable[[str], str]) -> _Page:
    def repl(m: re.Match[str]) -> str:
        if m.group(3) is not None:
            return fn(m.group(3))
        return m.group(1) + fn(m.group(2))

    return _map_prose(page, lambda line: _LINK_TARGET.sub(repl, line))


def _tracking_params(page: _Page, url: str) -> _Page:
    """utm_*, gclid, fbclid, ... dropped from link targets."""
    return _map_link_targets(page, strip_tracking)


def _relative_links(page: _Page, url: str) -> _Page:
    """Relative link targets resolved against the page URL."""

    def resolve(target: str) -> str:
        try:
            return urljoin(url, target)
        except ValueError:  # e.g. a malformed IPv6 host
            return target

    return _map_link_targets(page, resolve)


_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
_SPACES = re.compile(r"(?<=\S)[ \t\u00a0\u2000-\u200a\u202f\u3000]+")


def _whitespace(page: _Page, url: str) -> _Page:
    """NFC, no invisible characters, single spaces between words (indentation kept),
    no trailing spaces, at most one blank line, none at either end."""
    text = page.text
    if (clean := unicodedata.normalize("NFC", text).translate(_INVISIBLE)) != text:
        page = _Page.parse(clean)  # a character gone may start a code block
    out = _Page([], [])
    for line, code in zip(page.lines, page.code, strict=True):
        line = line.rstrip() if code else _SPACES.sub(" ", line.expandtabs(4)).rstrip()
        if line or code or (out.lines and out.lines[-1]):
            out.lines.append(line)
            out.code.append(code)
    while out.lines and not out.lines[-1]:
        out.lines.pop()
        out.code.pop()
    start = next((i for i, line in enumerate(out.lines) if line), len(out.lines))
    return _Page(out.lines[start:], out.code[start:])


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    edit: Callable[[_Page, str], _Page]  # (page, its url) -> page; the docstring says what

    def apply(self, markdown: str, url: str) -> str:
        """This rule alone on `markdown`."""
        return self.edit(_Page.parse(markdown), url).text


# In order of application: line removals first, whitespace last.
RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule("last_updated", _last_updated),
        Rule("relative_time", _relative_time),
        Rule("build_stamp", _build_stamp),
        Rule("escapes", _escapes),
        Rule("tracking_params", _tracking_params),
        Rule("relative_links", _relative_links),
        Rule("whitespace", _whitespace),
    )
}


# --- template blocks ------------------------------------------------------------------------


def block_fingerprint(block: str, position: str) -> str:
    """Identity of a block across pages: its text, case and whitespace aside, and its place
    on the page (`position`: "top 1" is a page's second block, "end 0" its last). Text that
    differs between pages (a digit, a name) is another block: content, not chrome."""
    canonical = " ".join(block.lower().split())
    return hashlib.sha1(f"{position}\n{canonical}".encode()).hexdigest()


def _template_candidates(markdown: str) -> list[tuple[str, frozenset[str]]]:
    """Each block of a page, with the fingerprints it could be learned under: none for a
    heading, a code block or a block holding a code span (code is content, however often
    it repeats), else one by its place from the top and one from the end."""
    blocks = split_blocks(markdown)
    out = []
    for i, b in enumerate(blocks):
        chrome = b.kind == "text" and not code_spans(b.text)
        fps = {block_fingerprint(b.text, f"top {i}"), block_fingerprint(b.text, f"end {len(blocks) - 1 - i}")}
        out.append((b.text, frozenset(fps) if chrome else frozenset()))
    return out


def learn_template_blocks(
    pages: Iterable[str], *, share: float, keep: Collection[str] = (), min_pages: int = 5
) -> frozenset[str]:
    """Fingerprints of the blocks found, the same text at the same place, on more than
    `share` of `pages` (normalized markdown), plus those in `keep` (the set learned last
    time) still on more than half that share: hysteresis, so a block hovering at the
    threshold does not flip the set run after run.

    Headings, code and blocks holding code are never template. Fewer than `min_pages` pages
    teach nothing.
    """
    counts: Counter[str] = Counter()
    n = 0
    for page in pages:
        n += 1
        counts.update(fp for _, fps in _template_candidates(page) for fp in fps)
    if n < min_pages:
        return frozenset()
    return frozenset(fp for fp, c in counts.items() if c > share * n or (fp in keep and c > share / 2 * n))


def normalize(
    markdown: str,
    *,
    url: str,
    disabled: Collection[str] = (),
    template_blocks: Collection[str] = (),
) -> str:
    """`markdown` with every rule not in `disabled` applied and the template blocks removed.

    Line ends become LF first, and code blocks stand apart from the text around them
    (a blank line before and after), whatever the rules.
    """
    unknown = sorted(set(disabled) - RULES.keys())
    if unknown:
        raise ValueError(f"unknown noise rule(s): {', '.join(unknown)}; known: {', '.join(RULES)}")
    page = _blank_lines_around_code(markdown)
    for rule in RULES.values():
        if rule.name not in disabled:
            page = rule.edit(page, url)
    # Again as the result reads: a rule's edit can make code (`    x` left where a date went)
    # or end a block. The result's parse is kept: `segment` splits the same text.
    markdown = _blank_lines_around_code(page.text).text
    return strip_template_blocks(markdown, template_blocks)[0]


def strip_template_blocks(markdown: str, template_blocks: Collection[str]) -> tuple[str, frozenset[str]]:
    """`markdown` (normalized) without its template blocks, and the fingerprints of those it had."""
    if not template_blocks:
        return markdown, frozenset()
    learned, kept, stripped = frozenset(template_blocks), [], set[str]()
    for text, fps in _template_candidates(markdown):
        if found := fps & learned:
            stripped |= found
        else:
            kept.append(text)
    return "\n\n".join(kept), frozenset(stripped)
