"""Retrieval text: the heading path and the words, nothing a reader needs besides."""

from __future__ import annotations

from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.retrieval import plain_text, retrieval_text
from freshness_pipeline.core.segment import segment


def test_link_targets_and_image_urls_go_anchor_and_alt_text_stay() -> None:
    md = 'See [the guide](https://a.test/guide?utm=1 "Guide") and ![a diagram](https://i.test/d.png).'
    assert plain_text(md) == "See the guide and a diagram."
    assert (
        plain_text("An autolink <https://a.test/x> stays readable.") == "An autolink https://a.test/x stays readable."
    )


def test_markup_goes_words_stay() -> None:
    md = "Some **bold**, *emphasis*, `max_retries` and max\\_retries.\n\n- one\n- two\n\n> quoted <b>tag</b>"
    assert plain_text(md) == "Some bold, emphasis, max_retries and max_retries.\none\ntwo\nquoted tag"


def test_code_blocks_and_tables_keep_their_words() -> None:
    md = "```python\nclient = Client(\n    retries=3)\n```\n\n| Key | Default |\n|---|---|\n| retries | 3 |"
    assert plain_text(md) == "client = Client( retries=3)\nKey\nDefault\nretries\n3"


def test_whitespace_is_normalized() -> None:
    assert plain_text("a  b\n c\t d\n\n\n\ne") == "a b c d\ne"


def test_the_heading_path_leads_without_namesake_counters() -> None:
    assert retrieval_text(("Guide", "Example [2]"), "Body [x](https://x.test).") == "Guide > Example\nBody x."
    assert retrieval_text((), "Body") == "Body"
    assert retrieval_text(("Only a heading",), "") == "Only a heading"


def test_a_link_target_edit_keeps_the_hash_a_word_edit_changes_it() -> None:
    def one(md: str):
        (s,) = segment("https://d.test/p", f"# P\n\n{md}\n")
        return s

    a = one("Read [the guide](https://d.test/old) first.")
    b = one("Read [the guide](https://d.test/new) first.")
    c = one("Read [the manual](https://d.test/new) first.")
    assert a.content_hash == b.content_hash != c.content_hash
    assert a.payload_hash != b.payload_hash
    assert b.text == "Read [the guide](https://d.test/new) first."  # the payload keeps the link


def test_no_escape_reaches_the_retrieval_text() -> None:
    """What trafilatura escapes (`[`, `*`, `_`, `<`, `|` in a table) reads as the page
    says, in the stored markdown where markdown allows it and always in the retrieval text."""
    html = (
        "<html><body><main><h1>Install acme-widgets[postgres]</h1>"
        "<p>Run pip install acme-widgets[postgres] &lt;tag&gt; a*b x_y *literal* ~z~ (x) {y}.</p>"
        "<table><tr><th>a</th><th>b</th></tr><tr><td>x[1]</td><td>a|b</td></tr></table></main></body></html>"
    )
    url = "https://docs.example.com/install/"
    markdown = normalize(extract(html, url).markdown, url=url)
    assert "acme-widgets[postgres] " in markdown and "# Install acme-widgets[postgres]" in markdown
    for s in segment(url, markdown):
        assert "\\" not in s.embed_text and "\\" not in s.heading, s.embed_text
        assert "acme-widgets[postgres] <tag> a*b x_y *literal* ~z~ (x) {y}" in s.embed_text
