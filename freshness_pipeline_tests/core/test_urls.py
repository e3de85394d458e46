from __future__ import annotations

import pytest

from freshness_pipeline.core.urls import normalize_url, strip_tracking


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTPS://Docs.Example.COM/Guide/", "https://docs.example.com/Guide"),
        ("https://www.example.com/a", "https://example.com/a"),
        ("https://example.com./a", "https://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("http://example.com:8000/a", "http://example.com:8000/a"),
        ("https://example.com:80/a", "https://example.com:80/a"),
        ("https://example.com/a#section", "https://example.com/a"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/", "https://example.com/"),
        ("https://example.com/a/b/", "https://example.com/a/b"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/a%7eb/%c3%bc", "https://example.com/a%7Eb/%C3%BC"),
        ("http://example.com/a", "http://example.com/a"),  # never upgraded to https
        ("https://[::1]:8443/x/", "https://[::1]:8443/x"),
    ],
)
def test_identity_form(url: str, expected: str) -> None:
    assert normalize_url(url) == expected
    assert normalize_url(expected) == expected  # idempotent


def test_query_is_dropped_unless_kept() -> None:
    url = "https://example.com/a/?utm_source=x&b=2&version=3&gclid=9&fbclid=1&ref=hn&mc_cid=5"
    assert normalize_url(url) == "https://example.com/a"
    assert normalize_url(url, keep_params=["version"]) == "https://example.com/a?version=3"
    assert normalize_url(url, keep_params=["utm_source", "ref"]) == "https://example.com/a"  # tracking: always
    assert normalize_url(url, drop_query=False) == "https://example.com/a?b=2&version=3"


def test_kept_params_are_sorted() -> None:
    url = "https://example.com/?z=1&a=2&m=&a=1"
    assert normalize_url(url, drop_query=False) == "https://example.com/?a=1&a=2&m=&z=1"
    reordered = "https://example.com/?m=&a=1&a=2&z=1"
    assert normalize_url(url, drop_query=False) == normalize_url(reordered, drop_query=False)


def test_real_params_that_look_like_trackers_survive() -> None:
    assert normalize_url("https://e.com/?source=a&gallery=1&refresh=2", drop_query=False) == (
        "https://e.com/?gallery=1&refresh=2&source=a"
    )


def test_relative_urls_resolve_against_base() -> None:
    base = "https://www.example.com/docs/guide/"
    assert normalize_url("../api/#x", base=base) == "https://example.com/docs/api"
    assert normalize_url("setup", base=base) == "https://example.com/docs/guide/setup"
    assert normalize_url("/abs?utm_medium=m", base=base) == "https://example.com/abs"
    assert normalize_url("https://other.org/x", base=base) == "https://other.org/x"


def test_strip_tracking_keeps_everything_else() -> None:
    assert strip_tracking("/a?utm_source=x&v=2#frag") == "/a?v=2#frag"
    assert strip_tracking("HTTPS://X.org/a/?v=2#f") == "HTTPS://X.org/a/?v=2#f"
