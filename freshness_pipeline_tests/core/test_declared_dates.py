"""A page's date is what it declares, never a date found in its text."""

from __future__ import annotations

import pytest

from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.noise import normalize

URL = "https://docs.example.com/guide/"
BODY = (
    "<h1>Guide</h1><p>Set <code>since</code> to 2008-09-15 to read older entries.</p>"
    "<h2>Changelog</h2><p>Released on March 3, 2026: version 2.0.</p>"
)


def page(head: str = "", article_top: str = "", article_end: str = "") -> str:
    return (
        f"<!doctype html><html><head><title>Guide</title>{head}</head><body>"
        "<header><p>Site built on 2026-11-30</p></header>"
        f"<main><article>{article_top}{BODY}{article_end}</article></main>"
        "<footer><p>© 2019-2026 Example, built 2026-11-30T10:00:00Z</p></footer></body></html>"
    )


@pytest.mark.parametrize(
    ("html", "date"),
    [
        (page('<meta property="article:modified_time" content="2025-04-05T10:00:00+00:00">'), "2025-04-05"),
        (page('<meta property="og:updated_time" content="2025-04-06">'), "2025-04-06"),
        (
            page('<script type="application/ld+json">{"@graph": [{"dateModified": "2025-04-07"}]}</script>'),
            "2025-04-07",
        ),
        (page('<script type="application/ld+json">{"datePublished": "2024-01-02"}</script>'), "2024-01-02"),
        (page('<meta name="date" content="2025-04-08">'), "2025-04-08"),
        (page(article_top='<header><time datetime="2025-04-09T08:00">April 9</time></header>'), "2025-04-09"),
        (page(article_end="<p>Last updated: June 3, 2025 14:05</p>"), "2025-06-03"),
        (page(article_end="<p><em>Updated on 2025-06-04</em></p>"), "2025-06-04"),
    ],
    ids=[
        "article-modified",
        "og-updated",
        "json-ld-modified",
        "json-ld-published",
        "meta-date",
        "time",
        "last-updated",
        "updated-on",
    ],
)
def test_declared_dates(html: str, date: str) -> None:
    assert extract(html, URL).date == date


def test_a_modified_date_wins_over_a_published_one() -> None:
    head = (
        '<script type="application/ld+json">{"datePublished": "2020-01-01", "dateModified": "2025-02-02"}</script>'
        '<meta name="date" content="2021-01-01">'
    )
    assert extract(page(head), URL).date == "2025-02-02"


def test_no_declared_date_is_none_whatever_the_text_says() -> None:
    # The example value, the newest changelog entry and the chrome's build stamp are not
    # the page's date; the pipeline then dates sections by the month it first saw them.
    got = extract(page(article_end="<p>Last updated 3 days ago</p>"), URL)
    assert got.date is None and "2008-09-15" in got.markdown


def test_the_last_updated_line_is_read_then_stripped_by_the_rules() -> None:
    got = extract(page(article_end="<p>Last updated: 2025-06-03</p>"), URL)
    assert got.date == "2025-06-03" and "Last updated" in got.markdown
    assert "Last updated" not in normalize(got.markdown, url=URL)
