from __future__ import annotations

import pytest

from freshness_pipeline.core.extract import Extracted, extract

URL = "https://docs.example.com/guide/install/"

NAV = "".join(f'<li><a href="/p{i}/">Navigation entry number {i}</a></li>' for i in range(60))
PAGE = f"""<!doctype html><html><head><title>Install | Docs</title>
<meta property="article:published_time" content="2024-01-02">
<meta property="article:modified_time" content="2026-06-03T10:00:00Z"></head>
<body><nav><ul>{NAV}</ul></nav>
<main>
<h1 id="install">Install <a class="headerlink" href="#install">¶</a></h1>
<p>Install the <code>widget</code> tool, see <a href="setup/">setup</a> and <a href="../api/#x">the API</a>.</p>
<h2 id="req">Requirements<a class="hash-link" href="#req">\u200b</a></h2>
<ul><li>Python 3.11</li><li>a compiler</li></ul>
<h3>Optional extras</h3>
<p>Some extras need <strong>libfoo</strong>.</p>
<pre><code># a comment, not a heading
pip install widget
</code></pre>
<h2>Configuration</h2>
<table><tr><th>Key</th><th>Default</th></tr><tr><td>retries</td><td>3</td></tr></table>
</main>
<footer>© 2019-2026 Example</footer></body></html>"""


def test_markdown_keeps_structure() -> None:
    got = extract(PAGE, URL)
    lines = got.markdown.split("\n")
    assert [line for line in lines if line.startswith("#") and not line.startswith("# a comment")] == [
        "# Install",
        "## Requirements",
        "### Optional extras",
        "## Configuration",
    ]
    assert "- Python 3.11" in lines
    assert "```\n# a comment, not a heading\npip install widget\n```" in got.markdown
    assert "| Key | Default |" in got.markdown
    assert "**libfoo**" in got.markdown and "`widget`" in got.markdown


def test_only_main_content() -> None:
    got = extract(PAGE, URL)
    assert "Navigation entry" not in got.markdown
    assert "2019" not in got.markdown


def test_links_resolve_against_the_page() -> None:
    md = extract(PAGE, URL).markdown
    assert "[setup](https://docs.example.com/guide/install/setup/)" in md
    assert "[the API](https://docs.example.com/guide/api/#x)" in md


def test_title_and_updated_date() -> None:
    got = extract(PAGE, URL)
    assert got.title == "Install"  # the site name trimmed
    assert got.date == "2026-06-03"
    published_only = PAGE.replace('<meta property="article:modified_time" content="2026-06-03T10:00:00Z">', "")
    assert extract(published_only, URL).date == "2024-01-02"
    assert extract("<html><body><main><p>no date here</p></main></body></html>", URL).date is None


def test_a_short_page_keeps_its_headings() -> None:
    md = extract("<html><body><main><h1>Hi</h1><p>Short.</p></main></body></html>", URL).markdown
    assert md == "# Hi\n\nShort."


def test_single_article_is_used_when_there_is_no_main() -> None:
    html = f"<html><body><div><ul>{NAV}</ul></div><article><h1>A</h1><p>Body text.</p></article></body></html>"
    assert extract(html, URL).markdown == "# A\n\nBody text."


@pytest.mark.parametrize(
    "garbage",
    ["", "   ", "\x00\x01\x02", "<<<>>>", "<html>", "<?xml version='1.0'?><a>b</a>", "<main></main>", "\ufffd" * 50],
)
def test_garbage_gives_empty_markdown(garbage: str) -> None:
    got = extract(garbage, URL)
    assert isinstance(got, Extracted) and got.markdown == ""


def test_never_raises_on_bad_links_or_urls() -> None:
    html = '<html><head><base href="http://[bad"></head><body><main><p><a href="x">x</a> text</p></main></body></html>'
    assert isinstance(extract(html, URL), Extracted)
    assert isinstance(extract(PAGE, "not a url"), Extracted)


def test_multiline_inline_code_becomes_a_closed_code_block() -> None:
    html = (
        "<html><body><main><h1>T</h1><p>Send the header: <code>Content-Disposition: form-data;\n"
        'name="user"</code>. Then more text.</p><p>Last paragraph.</p></main></body></html>'
    )
    md = extract(html, URL).markdown
    assert 'Send the header:\n```\nContent-Disposition: form-data;\nname="user"\n```\n' in md
    assert md.endswith("Last paragraph.")


def _page(body: str) -> str:
    return f"<html><head><title>T</title></head><body><nav><ul>{NAV}</ul></nav><main>{body}</main></body></html>"


def test_short_link_dense_list_items_are_kept() -> None:
    """Release notes: one-line entries that are mostly short links are content, not a menu."""
    items = "".join(
        f'<li>Fix {what}. PR <a href="https://github.com/o/r/pull/{n}">#{n}</a> by <a href="https://github.com/u{n}">@u{n}</a>.</li>'
        for n, what in ((123, "the retry loop"), (124, "a typo"))
    )
    packages = (
        '<ul><li><a href="https://a.example/">Ariadne</a></li><li><a href="https://s.example/">Strawberry</a></li></ul>'
    )
    md = extract(
        _page(f"<h1>Release notes</h1><h2>0.115.0</h2><ul>{items}</ul><h2>See also</h2>{packages}"), URL
    ).markdown
    assert "- Fix the retry loop. PR [#123](https://github.com/o/r/pull/123) by [@u123](https://github.com/u123)." in md
    assert "- Fix a typo. PR [#124]" in md
    assert "- [Ariadne](https://a.example/)" in md and "- [Strawberry](https://s.example/)" in md


def test_a_page_without_main_still_drops_link_dense_menus() -> None:
    """Without a <main> to cut to, trafilatura's link-density test still tells menus apart."""
    body = f"<ul>{NAV}</ul><h1>Install</h1><p>{'Install the tool with the installer of your system. ' * 5}</p>"
    md = extract(f"<html><body>{body}</body></html>", URL).markdown
    assert "Navigation entry" not in md and "Install the tool" in md


def test_a_collapsible_block_is_not_a_heading() -> None:
    """`<details><summary>` adds a paragraph, never a heading that would re-parent the
    headings after it (their keys would change when the block is added or removed)."""
    tail = "<h3>Sub</h3><p>Text under the sub heading.</p><h2>Next</h2><p>Next text.</p>"
    head = "<h1>Guide</h1><h2>Install</h2><p>Install it with pip.</p>"
    details = "<details><summary>Technical details</summary><p>Hidden explanation.</p></details>"
    plain = extract(_page(head + tail), URL).markdown
    folded = extract(_page(head + details + tail), URL).markdown
    headings = [line for line in plain.split("\n") if line.startswith("#")]
    assert [line for line in folded.split("\n") if line.startswith("#")] == headings
    assert "Technical details\n\nHidden explanation." in folded


@pytest.mark.parametrize(
    "form", ["<form><input name='q'><button>Send</button></form>", "<iframe src='x'></iframe>", ""]
)
def test_a_page_of_headings_only_keeps_them_as_headings(form: str) -> None:
    """The same markdown whether or not a line the noise rules strip stands under the
    title: a redeploy adding "Last updated: <date>" changes nothing."""
    bare = extract(_page(f"<h1>Contact us</h1>{form}"), URL).markdown
    stamped = extract(_page(f"<h1>Contact us</h1><p>Last updated: June 3, 2026</p>{form}"), URL).markdown
    assert bare == "# Contact us"
    assert stamped == "# Contact us\n\nLast updated: June 3, 2026"


@pytest.mark.parametrize("updated", ["", "<p>Last updated: June 3, 2026</p>"])
def test_a_related_pages_aside_is_never_text_of_a_page_without_a_paragraph(updated: str) -> None:
    """A "Related pages" aside in <main>, other on every request: its links and its heading
    are dropped whether or not the page has a paragraph (here: a "Last updated" line that
    the noise rules strip), so a quiet redeploy re-embeds nothing."""
    form = "<h2>Write to us</h2><form><input name='q'><button>Send</button></form>"
    aside = (
        "<aside><h4>Related pages</h4><ul><li><a href='/a/'>Install</a></li><li><a href='/b/'>API</a></li></ul></aside>"
    )
    md = extract(_page(f"<h1>Contact us</h1>{updated}{form}{aside}"), URL).markdown
    assert "Related" not in md and "Install" not in md
    assert md.startswith("# Contact us")
