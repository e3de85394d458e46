"""HTML page -> clean markdown, title and date, with trafilatura and htmldate."""

from __future__ import annotations

import logging
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

# Permalink anchors that doc generators append to headings: Sphinx/MkDocs `¶`, Docusaurus
# zero-width `hash-link`, `#` or `🔗` elsewhere. They would end up in every heading path.
_PERMALINKS = etree.XPath(
    "(//h1|//h2|//h3|//h4|//h5|//h6)//a[starts-with(@href, '#')]"
    "[contains(@class, 'headerlink') or contains(@class, 'anchor') or contains(@class, 'hash-link')"
    " or string-length(normalize-space(translate(., '\u200b¶#🔗', ''))) = 0]"
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
        tree.make_links_absolute(url, handle_failures="ignore")
        title = extract_title(tree)
        # Fast mode: markup and meta tags only, no free-text search. htmldate copies the tree.
        date = htmldate.find_date(tree, extensive_search=False, original_date=False, url=url)
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
    return Extracted(markdown or "", title or None, date)


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
