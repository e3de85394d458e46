"""A page that is only a list of links keeps its list, whatever noise the shipped fixture
(`demo/render.py`: `render` for markdown sites, `dress` for built ones) puts around it.
The pages are generated in the shapes of the real ones that lost their lists: a Sphinx
release-announcement index (a toctree in `role="main"`, no `<main>`) and a Docusaurus
command page ("Commands:" and five links in `<main><article>`)."""

from __future__ import annotations

import html
from itertools import combinations

import pytest
from lxml.html import fromstring

from freshness_pipeline.core import link_lists
from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.noise import learn_template_blocks, normalize, strip_template_blocks
from freshness_pipeline.demo.render import dress, render

NOISE = {
    "updated": "June 3, 2026 10:42",
    "build": "with mkdocs 1.6.1 on 2026-06-03T10:42:07Z (build #4012, 0a1b2c3d)",
    "tip": "press the slash key anywhere to search these docs.",
    "date": "2026-06-03",
    "related": "/guide/a/ /guide/b/ /guide/c/",
}
# Every noise mode: none, each alone, each pair, all of them.
MODES = [dict(c) for n in (0, 1, 2, len(NOISE)) for c in combinations(NOISE.items(), n)]
RELEASES = [f"Release {v}.{m}.0 announcement" for v in range(1, 4) for m in range(12)]


def sphinx_index() -> str:
    items = "".join(
        f'<li class="toctree-l1"><a class="reference internal" href="/announce/{i}/">{html.escape(t)}</a></li>'
        for i, t in enumerate(RELEASES)
    )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Release announcements</title></head><body>'
        '<div class="document"><div class="documentwrapper"><div class="bodywrapper">'
        '<div class="body" role="main"><section id="announcements"><h1>Release announcements</h1>'
        f'<div class="toctree-wrapper compound"><ul>{items}</ul></div></section></div></div></div>'
        '<div class="sphinxsidebar" role="navigation"><ul><li><a href="/">Contents</a></li></ul></div></div>'
        '<div class="footer">&copy; Copyright.</div></body></html>'
    )


def docusaurus_commands() -> str:
    links = "".join(
        f'<li><a href="/docs/cli/{c}/">wdio {c}</a></li>' for c in ("config", "install", "repl", "run", "x")
    )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>CLI | Docs</title></head><body>'
        '<nav class="navbar"><a href="/">Home</a></nav><main class="docMainContainer"><div class="row">'
        f'<article><div class="markdown" role="main"><h1>CLI</h1><p>Commands:</p><ul>{links}</ul></div></article>'
        '</div></main><footer class="footer">Built with Docusaurus.</footer></body></html>'
    )


MARKDOWN_INDEX = "# Release announcements\n\n" + "\n".join(f"- [{t}](/announce/{i}/)" for i, t in enumerate(RELEASES))
OTHERS = [f"# Page {i}\n\nA page of the site about the request {i} and its cache settings." for i in range(6)]


def site_texts(pages: dict[str, str]) -> dict[str, str]:
    """Each page as the crawl stores it: extracted, normalized, its site's template blocks gone."""
    texts = {
        path: normalize(extract(page, f"https://docs.example.com{path}").markdown, url=path)
        for path, page in pages.items()
    }
    blocks = learn_template_blocks(texts.values(), share=0.5)
    return {path: strip_template_blocks(text, blocks)[0] for path, text in texts.items()}


def rendered_site(noise: dict[str, str]) -> dict[str, str]:
    docs = {"/announce/": MARKDOWN_INDEX} | {f"/p{i}/": md for i, md in enumerate(OTHERS)}
    nav = {path: path.strip("/") for path in docs}
    return {path: render(md, title=path, nav=nav, **noise) for path, md in docs.items()}


def built_site(page: str, noise: dict[str, str]) -> dict[str, str]:
    others = {
        f"/p{i}/": '<html><head><title>Page</title></head><body><div class="body" role="main">'
        f"<h1>Page {i}</h1><p>A page of the site about the request {i} and its cache settings.</p></div>"
        '<div class="footer">&copy; Copyright.</div></body></html>'
        for i in range(len(OTHERS))
    }
    return {path: dress(html, **noise) for path, html in {"/index/": page, **others}.items()}


@pytest.mark.parametrize(
    ("site", "path"),
    [
        (rendered_site, "/announce/"),
        (lambda noise: built_site(sphinx_index(), noise), "/index/"),
        (lambda noise: built_site(docusaurus_commands(), noise), "/index/"),
    ],
    ids=["markdown-index", "sphinx-index", "docusaurus-commands"],
)
def test_a_page_of_links_reads_the_same_under_every_noise_mode(site, path) -> None:  # type: ignore[no-untyped-def]
    texts = {tuple(sorted(noise)): site_texts(site(noise))[path] for noise in MODES}
    assert len(set(texts.values())) == 1, {mode: len(text) for mode, text in texts.items()}
    (text,) = set(texts.values())
    links = text.count("](")
    assert links == (5 if "CLI" in text else len(RELEASES)), text


def test_lists_keep_nesting_code_and_emphasis() -> None:
    root = fromstring(
        '<div><p>Intro</p><ol start="3"><li><a href="https://x/a">A <code>x_y</code></a> *star*'
        '<ul><li><a href="https://x/b">B <em>it</em></a></li></ul></li><li><p><a href="https://x/c">C</a></p>'
        "<pre>line 1\n  line 2</pre></li></ol><ul><li>no link</li></ul></div>"
    )
    lifted = link_lists.lift(root)
    assert len(lifted) == 1 and root.find("ul") is not None  # a list without a link stays for trafilatura
    (token,) = lifted
    assert link_lists.restore(f"Intro\n\n{token}\n\n- no link", lifted) == (
        "Intro\n\n"
        "3. [A `x_y`](https://x/a) \\*star\\*\n"
        "   - [B *it*](https://x/b)\n"
        "4. [C](https://x/c)\n"
        "   ```\n   line 1\n     line 2\n   ```\n\n"
        "- no link"
    )
