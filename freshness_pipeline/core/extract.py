"""HTML page -> clean markdown, title and declared date, with trafilatura and lxml.

A page's date is what the page declares, never a guess: `article:modified_time`,
`og:updated_time`, JSON-LD `dateModified`, a "Last updated"/"Updated on" line in the
article, a `<time datetime>` in the article's header, `<meta name="date">`,
`article:published_time`, JSON-LD `datePublished`, in that order. No free-text search of
the body: a date in an example or in the newest entry of a changelog is not the page's
date (htmldate's `find_date` searches the body even in fast mode, so only its parser of
one declared string is used).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from configparser import ConfigParser
from copy import deepcopy
from dataclasses import dataclass
from datetime import datetime

import trafilatura
from htmldate.extractors import try_date_expr
from lxml import etree
from lxml.html import Element, HtmlElement, HTMLParser, fromstring
from trafilatura.metadata import extract_title
from trafilatura.settings import use_config

from freshness_pipeline.core import link_lists

__all__ = ["Extracted", "extract"]

logger = logging.getLogger(__name__)

# Permalink anchors that doc generators put in headings: Sphinx/MkDocs `¶`, Docusaurus
# zero-width space, `#`, `§`, `🔗` or an icon. They would end up in every heading path.
_PERMALINKS = etree.XPath(
    "(//h1|//h2|//h3|//h4|//h5|//h6)//a[starts-with(@href, '#')]"
    "[string-length(normalize-space(translate(., '\u200b¶#§🔗', ''))) = 0]"
)
# Below MIN_EXTRACTED_SIZE chars trafilatura swaps its result for a plain-text "baseline" dump
# (no headings, one line per inline element). Short docs pages are normal here, and the text
# is already restricted to <main>, so only an empty result may fall back (_BASELINE), and
# only after `_headings_only` had its say (_NO_BASELINE tells that the result was empty).
_BASELINE = use_config()
_BASELINE.set("DEFAULT", "MIN_EXTRACTED_SIZE", "1")
_NO_BASELINE = use_config()
_NO_BASELINE.set("DEFAULT", "MIN_EXTRACTED_SIZE", "0")
_HEADINGS = etree.XPath("//h1|//h2|//h3|//h4|//h5|//h6")


@dataclass(frozen=True, slots=True)
class Extracted:
    markdown: str  # "" when the page has no extractable text
    title: str | None = None
    date: str | None = None  # "YYYY-MM-DD" the page declares, last-updated before published
    error: str | None = None  # why the page cannot be read whole (its text is not to be used)


# libxml2 stops an HTML parse 256 elements deep, dropping what follows in the document, and
# trafilatura parses with its defaults: the page is parsed here with `huge_tree`, which
# lifts that limit to 2048. What is deeper still is said, never dropped silently.
_TOO_DEEP = "Excessive depth"


def _parse(html: str) -> tuple[HtmlElement | None, str | None]:
    """The page's tree, and why it is not whole (None when it is)."""
    parser = HTMLParser(
        collect_ids=False,
        default_doctype=False,
        encoding="utf-8",
        remove_comments=True,
        remove_pis=True,
        huge_tree=True,
    )
    tree = fromstring(html.encode("utf-8", "surrogatepass"), parser=parser)
    if any(_TOO_DEEP in e.message for e in parser.error_log):
        return tree, "HTML nested over 2048 levels deep cannot be parsed whole: not read (a page with text keeps it)"
    return tree, None


def extract(html: str, url: str) -> Extracted:
    """The main text of a page as markdown (`#` headings, lists, code, tables).

    Never raises: garbage in gives `Extracted("")`.
    """
    try:
        tree, broken = _parse(html) if html.strip() else (None, None)
        if broken:
            return Extracted("", error=broken)
        tree = trafilatura.load_html(tree) if tree is not None else None
        if tree is None:
            return Extracted("")
        for a in _PERMALINKS(tree):
            a.drop_tree()
        # trafilatura resolves relative links against the site root, not the page: do it here.
        tree.resolve_base_href(handle_failures="ignore")
        tree.make_links_absolute(url, resolve_base_href=False, handle_failures="ignore")
        title = extract_title(tree)
        root, is_main = _content_root(tree)
        lists = link_lists.lift(root) if is_main else {}
        markdown = _markdown(root, _NO_BASELINE) or _headings_only(root) or _markdown(root, _BASELINE)
        markdown = link_lists.restore(markdown, lists)
    except Exception:  # trafilatura and lxml raise many kinds of errors on broken markup
        logger.warning("extraction failed for %s", url, exc_info=True)
        return Extracted("")
    markdown = _own_line_fences(markdown or "")
    return Extracted(markdown, title or None, declared_date(tree, markdown))


_MIN_DATE, _MAX_DATE = datetime(1995, 1, 1), datetime(2100, 1, 1)
_MODIFIED_META = etree.XPath(
    "//meta[@property='article:modified_time' or @name='article:modified_time']/@content"
    " | //meta[@property='og:updated_time' or @name='og:updated_time']/@content"
)
_DATE_META = etree.XPath("//meta[translate(@name, 'DATE', 'date')='date']/@content")
_PUBLISHED_META = etree.XPath("//meta[@property='article:published_time' or @name='article:published_time']/@content")
_HEADER_TIME = etree.XPath("(//article//header//time | //main//header//time)/@datetime")
_JSON_LD = etree.XPath("//script[@type='application/ld+json']/text()")
# A line of the article that says when the page was updated, e.g. "Last updated: June 3, 2026".
_UPDATED_LINE = re.compile(
    r"^[\W_]*(?:this\s+page\s+was\s+|page\s+)?(?:last\s+(?:updated|modified)\s*:?|updated\s*(?:on\b|:))"
    r"\s*(?:on\s+)?(?P<when>[^\n]{6,60}?)[\W_]*$",
    re.IGNORECASE | re.MULTILINE,
)


def declared_date(tree: HtmlElement, markdown: str) -> str | None:
    """The first date the page declares, as "YYYY-MM-DD" (see the module docstring)."""
    ld = list(_json_ld_dates(tree))
    candidates = (
        *_MODIFIED_META(tree),
        *(v for k, v in ld if k == "dateModified"),
        *(m.group("when") for m in _UPDATED_LINE.finditer(markdown)),
        *_HEADER_TIME(tree),
        *_DATE_META(tree),
        *_PUBLISHED_META(tree),
        *(v for k, v in ld if k == "datePublished"),
    )
    for value in candidates:
        if isinstance(value, str) and (day := try_date_expr(value.strip(), "%Y-%m-%d", False, _MIN_DATE, _MAX_DATE)):
            return day
    return None


def _json_ld_dates(tree: HtmlElement) -> Iterator[tuple[str, object]]:
    """(dateModified | datePublished, value) anywhere in the page's JSON-LD, in order."""
    for raw in _JSON_LD(tree):
        try:
            stack = [json.loads(raw)]
        except ValueError:
            continue  # broken JSON-LD declares nothing
        while stack:
            node = stack.pop(0)
            if isinstance(node, list):
                stack[:0] = node
            elif isinstance(node, dict):
                yield from ((k, node[k]) for k in ("dateModified", "datePublished") if k in node)
                stack[:0] = [v for v in node.values() if isinstance(v, (dict, list))]


def _markdown(root: HtmlElement, config: ConfigParser) -> str:
    return (
        trafilatura.extract(
            root,
            output_format="markdown",
            include_formatting=True,
            include_links=True,
            include_tables=True,
            include_images=False,
            include_comments=False,
            fast=True,
            config=config,
        )
        or ""
    )


def _headings_only(root: HtmlElement) -> str:
    """The headings of a page whose only text they are (a title above a form or an
    embed), as markdown headings: what trafilatura keeps of the same headings once any
    paragraph stands under them. Its plain-text fallback would write them as one
    paragraph with the form's button labels, so a redeploy adding a line that the noise
    rules strip (a "Last updated" date) would turn the page into another text."""
    lines = []
    for h in _HEADINGS(root):
        if (text := " ".join(h.text_content().split())) and not _over_links_only(h):
            lines.append(f"{'#' * int(h.tag[1])} {text}")
    return "\n\n".join(lines)


def _chars(el: HtmlElement) -> int:
    return len("".join(el.text_content().split()))


def _over_links_only(heading: HtmlElement) -> bool:
    """Whether a heading heads a block of nothing but links: a "Related pages" aside
    (other on every request), a "see also" list. trafilatura drops such a block's links
    from any page with a paragraph, and so its heading too: here it goes as well."""
    block = heading.getparent()
    if block is None:
        return False
    links = sum(_chars(a) for a in block.iter("a"))
    return links > 0 and _chars(block) - _chars(heading) - links <= 0


_TRAILING_FENCE = re.compile(r"(.*\S)[ \t]*```[ \t]*")


def _own_line_fences(markdown: str) -> str:
    """trafilatura writes a multi-line inline `<code>` as "prose ```", code lines, "```":
    the opening fence then goes unseen and the closing one opens a block that never ends.
    Put such opening fences on their own line."""
    out: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        m = None if in_code else _TRAILING_FENCE.fullmatch(line)
        if m and not line.lstrip().startswith("```"):
            out += [m.group(1), "```"]
            in_code = True
        else:
            in_code ^= line.lstrip().startswith("```")
            out.append(line)
    return "\n".join(out)


_ROLE_MAIN = etree.XPath("//*[@role='main']")


def _content_root(tree: HtmlElement) -> tuple[HtmlElement, bool]:
    """A copy of the page cut down to its `<main>` (or its `role="main"` element, as Sphinx
    writes it, or its only `<article>`), and whether it was.

    On short docs pages the sidebar can outweigh the article and trafilatura then keeps the
    navigation; handing it only the main element avoids that. A `<details>` block's
    `<summary>` becomes a paragraph: trafilatura makes it a heading, which would re-parent
    every heading after it, so adding or removing a collapsible block would change keys.
    """
    main = tree.find(".//main")
    if main is None:
        main = next(iter(_ROLE_MAIN(tree)), None)
    if main is None:
        articles = tree.findall(".//article")
        main = articles[0] if len(articles) == 1 else None
    if main is None:
        root = deepcopy(tree)
    else:
        root = Element("html")
        etree.SubElement(root, "body").append(deepcopy(main))
    for el in root.iter("summary", "details"):
        el.tag = "p" if el.tag == "summary" else "div"
    return root, main is not None
