"""HTML page -> clean markdown, title and date, with trafilatura and htmldate."""

from __future__ import annotations

import logging
import re
from copy import deepcopy
from dataclasses import dataclass

import htmldate
import trafilatura
from lxml import etree
from lxml.html import Element, HtmlElement
from trafilatura.metadata import extract_title
from trafilatura.settings import use_config

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
# is already restricted to <main>, so only an empty result may fall back.
_CONFIG = use_config()
_CONFIG.set("DEFAULT", "MIN_EXTRACTED_SIZE", "1")


@dataclass(frozen=True, slots=True)
class Extracted:
    markdown: str  # "" when the page has no extractable text
    title: str | None = None
    date: str | None = None  # "YYYY-MM-DD", last-updated preferred over published


def extract(html: str, url: str) -> Extracted:
    """The main text of a page as markdown (`#` headings, lists, code, tables).

    Never raises: garbage in gives `Extracted("")`.
    """
    try:
        tree = trafilatura.load_html(html)
        if tree is None:
            return Extracted("")
        for a in _PERMALINKS(tree):
            a.drop_tree()
        # trafilatura resolves relative links against the site root, not the page: do it here.
        tree.resolve_base_href(handle_failures="ignore")
        tree.make_links_absolute(url, resolve_base_href=False, handle_failures="ignore")
        title = extract_title(tree)
        # Fast mode: markup and meta tags only, no free-text search; a date in the URL (the
        # publication's, usually) only as a last resort; never the page chrome, whose build
        # stamps and copyright lines date the site, not the page.
        date = htmldate.find_date(
            _without_chrome(tree),
            extensive_search=False,
            original_date=False,
            url=url,
            deferred_url_extractor=True,
        )
        markdown = trafilatura.extract(
            _content_root(tree),
            output_format="markdown",
            include_formatting=True,
            include_links=True,
            include_tables=True,
            include_images=False,
            include_comments=False,
            fast=True,
            config=_CONFIG,
        )
    except Exception:  # trafilatura and lxml raise many kinds of errors on broken markup
        logger.warning("extraction failed for %s", url, exc_info=True)
        return Extracted("")
    return Extracted(_own_line_fences(markdown or ""), title or None, date)


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


_CHROME = etree.XPath("//footer|//nav|//header|//aside")


def _without_chrome(tree: HtmlElement) -> HtmlElement:
    copy = deepcopy(tree)
    for el in _CHROME(copy):
        el.drop_tree()
    return copy


def _content_root(tree: HtmlElement) -> HtmlElement:
    """A copy of the page cut down to its `<main>` (or its only `<article>`).

    On short docs pages the sidebar can outweigh the article and trafilatura then keeps the
    navigation; handing it only the main element avoids that.
    """
    main = tree.find(".//main")
    if main is None:
        articles = tree.findall(".//article")
        main = articles[0] if len(articles) == 1 else None
    if main is None:
        root = deepcopy(tree)
    else:
        root = Element("html")
        etree.SubElement(root, "body").append(deepcopy(main))
    return root
