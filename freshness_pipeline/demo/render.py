"""Render a folder of markdown docs as a docs-site HTML page, the way a static site
generator would: the article in <main>, plus the chrome that changes without meaning
(navigation, a "last updated" line, a build stamp) that the pipeline must ignore."""

from __future__ import annotations

import html
from collections.abc import Mapping
from functools import lru_cache

from markdown_it import MarkdownIt
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.anchors import anchors_plugin

# What MkDocs sites write: CommonMark with raw HTML, tables, `!!! note` admonitions and
# headings with ids (the package's one markdown parser; core/retrieval.py uses it too).
_MD = MarkdownIt("commonmark", {"html": True}).enable("table").use(admon_plugin).use(anchors_plugin, max_level=6)


def page_path(rel: str) -> str:
    """`a/b.md` -> `/a/b/`, `index.md` -> `/` (the mkdocs convention); a built page's key
    is its path already."""
    if rel.startswith("/"):
        return rel
    stem = rel.removesuffix(".md")
    if stem == "index":
        return "/"
    stem = stem.removesuffix("/index")
    return f"/{stem}/"


def render(
    body_md: str,
    *,
    title: str,
    nav: Mapping[str, str],
    updated: str | None = None,
    build: str | None = None,
    tip: str | None = None,
    date: str | None = None,
    related: str | None = None,
) -> str:
    """One HTML page. `nav` maps paths to link titles; `updated`, `build` and `tip` (a
    "tip of the day" block atop the article, where extraction keeps it) are noise; `date`
    is the page's declared date (`<meta name="date">`, what htmldate reads first); `related`
    (page paths, space separated) a "Related pages" aside in <main>, other on every build."""
    article = _article(body_md)
    links = "\n".join(f'<li><a href="{p}">{html.escape(t)}</a></li>' for p, t in nav.items())
    stamp = f"<p>Last updated: {html.escape(updated)}</p>" if updated else ""
    built = f"<p>Built {html.escape(build)}</p>" if build else ""
    tip_block = f'<div class="tip-of-the-day"><p>Tip of the day: {html.escape(tip)}</p></div>' if tip else ""
    meta = f'<meta name="date" content="{html.escape(date)}">' if date else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{meta}<title>{html.escape(title)}</title></head>
<body>
<header><a href="/">Docs home</a></header>
<nav><ul>{links}</ul></nav>
<main><article>{tip_block}
{article}
{stamp}
</article>{_related(related)}</main>
<footer>{built}<p>Documentation licensed under CC BY 4.0.</p></footer>
</body></html>"""


# Where a built page's main text and footer open: Sphinx (alabaster), then Docusaurus.
_MAIN_OPENINGS = ('role="main">', '<div class="theme-doc-markdown markdown">')
_FOOTER_OPENINGS = ('<div class="footer">', '<footer class="theme-layout-footer footer footer--dark">')


def dress(
    page: str,
    *,
    updated: str | None = None,
    build: str | None = None,
    tip: str | None = None,
    date: str | None = None,
    related: str | None = None,
) -> str:
    """A page a site generator built (Sphinx or Docusaurus) with the same noise `render`
    adds: the tip and the "last updated" line atop the main text, the build stamp in the
    footer, the declared date in the head."""
    tip_block = f'<div class="tip-of-the-day"><p>Tip of the day: {html.escape(tip)}</p></div>' if tip else ""
    top = tip_block + (f"<p>Last updated: {html.escape(updated)}</p>" if updated else "") + _related(related)
    if top:
        page = _after_first(page, _MAIN_OPENINGS, top)
    if build:
        page = _after_first(page, _FOOTER_OPENINGS, f"<p>Built {html.escape(build)}</p>")
    if date:
        page = page.replace("</head>", f'<meta name="date" content="{html.escape(date)}"></head>', 1)
    return page


def _after_first(page: str, openings: tuple[str, ...], text: str) -> str:
    """`text` placed right after the first of `openings` the page has (none: unchanged)."""
    for opening in openings:
        if opening in page:
            return page.replace(opening, opening + text, 1)
    return page


def _related(paths: str | None) -> str:
    if not paths:
        return ""
    items = (f'<li><a href="{html.escape(p)}">{html.escape(p.strip("/") or "Home")}</a></li>' for p in paths.split())
    links = "".join(items)
    return f'<aside class="related"><h4>Related pages</h4><ul>{links}</ul></aside>'


@lru_cache(maxsize=512)
def _article(body_md: str) -> str:
    """The article's HTML. Cached: a site's history republishes mostly unchanged pages, and
    a replay renders each page once per build and once more for its oracle."""
    return _MD.render(body_md)


def title_of(body_md: str, fallback: str) -> str:
    for line in body_md.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return fallback
