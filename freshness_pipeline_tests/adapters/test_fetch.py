"""The fetcher against a loopback site: outcomes, retries, redirects, robots, discovery."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from freshness_pipeline.adapters.fetch import DiscoveryError, Fetcher, Target
from freshness_pipeline.config import DiscoveryPolicy, FetchPolicy, Source
from freshness_pipeline.core.models import FetchResult, Outcome
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline_tests.sitefixture import Page, SiteServer

FAST: dict[str, Any] = {"timeout_s": 1.0, "backoff_s": 0.01, "max_retries": 2}


def policy(**fetch: Any) -> FetchPolicy:
    return FetchPolicy(**{**FAST, **fetch})


@pytest.fixture
def site() -> Iterator[SiteServer]:
    pages = {f"/docs/{name}": Page(f"<html><title>{name}</title><p>{name} body</p></html>") for name in "abc"}
    with SiteServer(pages) as server:
        yield server


def fetcher(site: SiteServer, **fetch: Any) -> Fetcher:
    return Fetcher(Source(name="t", sitemap=site.url("/sitemap.xml"), fetch=policy(**fetch)))


def target(site: SiteServer, path: str, **validators: Any) -> Target:
    return Target(normalize_url(site.url(path)), site.url(path), **validators)


def fetch_one(site: SiteServer, path: str, *, validators: dict[str, Any] | None = None, **fetch: Any) -> FetchResult:
    with fetcher(site, **fetch) as f:
        [result] = f.fetch([target(site, path, **(validators or {}))])
    return result


# -- status codes ------------------------------------------------------------------


def test_ok_carries_body_and_validators(site: SiteServer) -> None:
    r = fetch_one(site, "/docs/a")
    assert r.outcome is Outcome.OK and r.status_code == 200
    assert r.html is not None and "a body" in r.html
    assert r.etag and r.body_sha256 and r.fetched_at > 0
    assert r.final_url is None and r.links == ()  # no link discovery without start_urls


@pytest.mark.parametrize("status", [404, 410])
def test_missing_pages_are_gone(site: SiteServer, status: int) -> None:
    site.pages["/docs/x"] = Page("nope", status=status)
    r = fetch_one(site, "/docs/x")
    assert (r.outcome, r.status_code) == (Outcome.GONE, status)
    assert fetch_one(site, "/docs/never-existed").outcome is Outcome.GONE


def test_5xx_burst_is_retried_then_ok(site: SiteServer) -> None:
    site.faults["/docs/a"] = [503, 500]
    r = fetch_one(site, "/docs/a")
    assert r.outcome is Outcome.OK
    assert site.paths_requested("/docs/a") == 3


def test_persistent_5xx_is_an_error_not_gone(site: SiteServer) -> None:
    site.faults["/docs/a"] = [503] * 10
    r = fetch_one(site, "/docs/a", max_retries=2)
    assert r.outcome is Outcome.ERROR and r.status_code == 503
    assert "503" in r.reason and "3 attempts" in r.reason
    assert site.paths_requested("/docs/a") == 3


def test_403_is_an_error_and_not_retried(site: SiteServer) -> None:
    site.faults["/docs/a"] = [403]
    r = fetch_one(site, "/docs/a")
    assert r.outcome is Outcome.ERROR and "403" in r.reason
    assert site.paths_requested("/docs/a") == 1


def test_429_retry_after_is_honoured(site: SiteServer) -> None:
    site.faults["/docs/a"] = [("429", 0.4)]
    start = time.monotonic()
    r = fetch_one(site, "/docs/a", backoff_s=0.0)
    assert r.outcome is Outcome.OK
    assert time.monotonic() - start >= 0.4
    assert site.paths_requested("/docs/a") == 2


def test_retry_after_as_an_http_date(site: SiteServer) -> None:
    site.faults["/docs/a"] = [("503", "Wed, 21 Oct 2015 07:28:00 GMT")]  # in the past: no wait
    assert fetch_one(site, "/docs/a", backoff_s=5.0).outcome is Outcome.OK
    assert site.paths_requested("/docs/a") == 2


def test_retry_after_over_the_limit_is_not_waited_for(site: SiteServer) -> None:
    site.faults["/docs/a"] = [("429", 120)]
    start = time.monotonic()
    r = fetch_one(site, "/docs/a", max_retry_after_s=1.0)
    assert r.outcome is Outcome.ERROR and "Retry-After 120s" in r.reason
    assert time.monotonic() - start < 30  # not the 120 s asked for (a bound that holds on a busy machine)
    assert site.paths_requested("/docs/a") == 1


def test_hang_past_timeout_is_an_error(site: SiteServer) -> None:
    site.hang_s = 20.0
    site.faults["/docs/a"] = ["hang"]
    start = time.monotonic()
    r = fetch_one(site, "/docs/a", timeout_s=0.3, max_retries=0)
    assert r.outcome is Outcome.ERROR and "timeout" in r.reason
    assert time.monotonic() - start < 10  # the 0.3 s timeout, not the 20 s hang


def test_hang_then_retry_succeeds(site: SiteServer) -> None:
    site.hang_s = 3.0
    site.faults["/docs/a"] = ["hang"]
    assert fetch_one(site, "/docs/a", timeout_s=0.3, max_retries=1).outcome is Outcome.OK


def test_connection_refused_is_an_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    url = f"http://127.0.0.1:{port}/docs/a"
    with Fetcher(Source(name="t", sitemap=url, fetch=policy(max_retries=0, obey_robots=False))) as f:
        [r] = f.fetch([Target(url, url)])
    assert r.outcome is Outcome.ERROR and "connection" in r.reason


# -- redirects ---------------------------------------------------------------------


def test_redirect_chain_records_the_final_url(site: SiteServer) -> None:
    site.redirects["/old"] = (301, "/older")
    site.redirects["/older"] = (308, site.url("/docs/b"))
    r = fetch_one(site, "/old")
    assert r.outcome is Outcome.OK and r.html is not None and "b body" in r.html
    assert r.url == normalize_url(site.url("/old"))
    assert r.final_url == normalize_url(site.url("/docs/b"))


def test_redirect_loop_is_an_error(site: SiteServer) -> None:
    site.redirects["/x"] = (301, "/y")
    site.redirects["/y"] = (302, "/x")
    r = fetch_one(site, "/x")
    assert r.outcome is Outcome.ERROR and "redirect loop" in r.reason


def test_redirect_chain_over_the_limit_is_an_error(site: SiteServer) -> None:
    for i in range(3):
        site.redirects[f"/r{i}"] = (301, f"/r{i + 1}")
    site.pages["/r3"] = Page("<p>end</p>")
    assert fetch_one(site, "/r0", max_redirects=3).outcome is Outcome.OK
    r = fetch_one(site, "/r0", max_redirects=2)
    assert r.outcome is Outcome.ERROR and "more than 2 redirects" in r.reason


# -- validators --------------------------------------------------------------------


def test_etag_answered_with_304(site: SiteServer) -> None:
    first = fetch_one(site, "/docs/a")
    r = fetch_one(site, "/docs/a", validators={"etag": first.etag, "body_sha256": first.body_sha256})
    assert (r.outcome, r.status_code) == (Outcome.NOT_MODIFIED, 304)
    assert r.etag == first.etag and r.body_sha256 == first.body_sha256 and r.html is None
    assert site.requests[-1][2]["if-none-match"] == first.etag


def test_last_modified_sent_as_if_modified_since(site: SiteServer) -> None:
    stamp = "Wed, 21 Oct 2015 07:28:00 GMT"
    site.pages["/docs/lm"] = Page("<p>lm</p>", etag=None, headers={"Last-Modified": stamp})
    first = fetch_one(site, "/docs/lm")
    assert first.last_modified == stamp and first.etag is None
    r = fetch_one(site, "/docs/lm", validators={"last_modified": stamp})
    assert r.outcome is Outcome.NOT_MODIFIED and r.last_modified == stamp
    assert site.requests[-1][2]["if-modified-since"] == stamp


def test_random_etags_fall_back_to_the_body_hash(site: SiteServer) -> None:
    site.etags = "random"
    first = fetch_one(site, "/docs/a")
    again = {"etag": first.etag, "body_sha256": first.body_sha256}
    r = fetch_one(site, "/docs/a", validators=again)
    assert r.outcome is Outcome.NOT_MODIFIED and r.status_code == 200 and "body unchanged" in r.reason
    assert r.etag != first.etag  # the new validator is kept for next time
    site.pages["/docs/a"] = Page("<p>a, edited</p>")
    assert fetch_one(site, "/docs/a", validators=again).outcome is Outcome.OK


# -- content -----------------------------------------------------------------------


def test_non_html_is_skipped(site: SiteServer) -> None:
    site.pages["/docs/manual.pdf"] = Page(b"%PDF-1.7 ...", content_type="application/pdf")
    r = fetch_one(site, "/docs/manual.pdf")
    assert r.outcome is Outcome.SKIPPED and "application/pdf" in r.reason and r.html is None


def test_oversize_is_skipped(site: SiteServer) -> None:
    site.pages["/docs/huge"] = Page("<p>" + "x" * 5000 + "</p>")
    r = fetch_one(site, "/docs/huge", max_bytes=1000)
    assert r.outcome is Outcome.SKIPPED and "max_bytes" in r.reason and r.html is None


def test_user_agent_names_the_contact(site: SiteServer) -> None:
    fetch_one(site, "/docs/a", contact="crawler@docs.test")
    assert "crawler@docs.test" in site.requests[-1][2]["user-agent"]


def test_every_target_yields_one_result(site: SiteServer) -> None:
    site.faults["/docs/b"] = [503] * 10
    site.redirects["/x"] = (301, "/x")
    paths = ["/docs/a", "/docs/b", "/docs/c", "/x", "/missing", "/docs/a?utm_source=feed"]
    targets = [Target(f"id:{p}", site.url(p)) for p in paths]
    with fetcher(site, max_retries=0) as f:
        results = list(f.fetch(targets))
    assert sorted(r.url for r in results) == sorted(t.url for t in targets)


# -- robots.txt --------------------------------------------------------------------


def test_robots_disallow_is_skipped(site: SiteServer) -> None:
    site.robots = "User-agent: *\nDisallow: /docs/b\n"
    r = fetch_one(site, "/docs/b")
    assert r.outcome is Outcome.SKIPPED and r.reason == "disallowed by robots.txt"
    assert site.paths_requested("/docs/b") == 0
    assert fetch_one(site, "/docs/a").outcome is Outcome.OK
    assert fetch_one(site, "/docs/b", obey_robots=False).outcome is Outcome.OK


def test_unreachable_robots_skips_everything(site: SiteServer) -> None:
    site.faults["/robots.txt"] = [503] * 10
    r = fetch_one(site, "/docs/a", max_retries=1)
    assert r.outcome is Outcome.SKIPPED and "robots.txt unreachable" in r.reason


def test_crawl_delay_spaces_requests(site: SiteServer) -> None:
    site.robots = "User-agent: *\nCrawl-delay: 0.2\n"
    start = time.monotonic()
    with fetcher(site, concurrency=8) as f:
        results = list(f.fetch([target(site, p) for p in ("/docs/a", "/docs/b", "/docs/c")]))
    assert {r.outcome for r in results} == {Outcome.OK}
    assert time.monotonic() - start >= 0.4  # three starts, 0.2 s apart


def test_rate_cap_spaces_requests(site: SiteServer) -> None:
    start = time.monotonic()
    with fetcher(site, rate_per_s=10) as f:
        list(f.fetch([target(site, p) for p in ("/docs/a", "/docs/b", "/docs/c")]))
    assert time.monotonic() - start >= 0.2


# -- discovery ---------------------------------------------------------------------


def test_gzipped_sitemap_index_discovery() -> None:
    pages = {f"/docs/p{i}": Page(f"<p>{i}</p>", lastmod=f"2024-01-0{i + 1}") for i in range(5)}
    pages["/docs/gone"] = Page("x", status=404)
    with SiteServer(pages, sitemap="index", sitemap_children=2) as site, fetcher(site) as f:
        found = f.discover()
        assert sorted(found.urls) == sorted(site.url(f"/docs/p{i}") for i in range(5))
        assert found.lastmod[normalize_url(site.url("/docs/p3"))] == "2024-01-04"
        assert site.paths_requested("/sitemap-0.xml.gz") == site.paths_requested("/sitemap-1.xml.gz") == 1


def test_sitemap_from_robots_when_only_start_urls(site: SiteServer) -> None:
    site.robots = f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n"
    src = Source(name="t", start_urls=[site.url("/elsewhere/")], fetch=policy())
    with Fetcher(src) as f:
        urls = f.discover().urls
    assert {site.url(f"/docs/{n}") for n in "abc"} <= set(urls)


def test_unreadable_sitemap_raises(site: SiteServer) -> None:
    site.sitemap = None
    with fetcher(site) as f, pytest.raises(DiscoveryError, match="404"):
        f.discover()
    site.pages["/sitemap.xml"] = Page("<urlset", content_type="application/xml")
    with fetcher(site) as f, pytest.raises(DiscoveryError, match="not valid XML"):
        f.discover()


def _link_site() -> SiteServer:
    def page(*links: str) -> Page:
        return Page("".join(f'<a href="{link}">{link}</a>' for link in links))

    return SiteServer(
        {
            "/docs/": page("intro", "guide/", "/blog/post", "private/p", "http://other.invalid/docs/x", "#top"),
            "/docs/intro": page("/docs/", "guide/deep?utm_source=x#frag"),
            "/docs/guide/": page("deep", "../api"),
            "/docs/guide/deep": page("deeper"),
            "/docs/guide/deeper": page(),
            "/docs/api": page(),
            "/docs/private/p": page(),
            "/blog/post": page("/docs/intro"),
        },
        robots="User-agent: *\nDisallow: /docs/private/\n",
    )


def _discover(site: SiteServer, **discovery: Any) -> set[str]:
    src = Source(
        name="t",
        start_urls=[site.url("/docs/")],
        fetch=policy(),
        discovery=DiscoveryPolicy(**discovery),
    )
    with Fetcher(src) as f:
        return {urlsplit(normalize_url(u)).path for u in f.discover().urls}


def test_link_discovery_within_scope_obeying_robots() -> None:
    with _link_site() as site:
        found = _discover(site)
        assert found == {
            "/docs",
            "/docs/intro",
            "/docs/guide",
            "/docs/guide/deep",
            "/docs/guide/deeper",
            "/docs/api",
        }
        assert not any(p.startswith("/docs/private") for _, p, _ in site.requests)


def test_link_discovery_include_exclude_depth_and_max_pages() -> None:
    with _link_site() as site:
        assert _discover(site, exclude=[r"/guide"]) == {"/docs", "/docs/intro"}
        assert _discover(site, include=[r"/docs/(intro|guide)?$"]) == {
            "/docs",
            "/docs/intro",
            "/docs/guide",
        }
        assert _discover(site, max_depth=1) == {"/docs", "/docs/intro", "/docs/guide"}
        assert len(_discover(site, max_pages=3)) == 3
        assert "/blog/post" in _discover(site, scope_prefix=site.url("/"), max_depth=1)


def test_links_are_absolute_and_only_with_discovery(site: SiteServer) -> None:
    site.pages["/docs/a"] = Page('<a href="b#x">b</a> <A HREF=\'/docs/c?q=1\'>c</A> <a href="mailto:x@y">m</a>')
    src = Source(name="t", start_urls=[site.url("/docs/a")], fetch=policy())
    with Fetcher(src) as f:
        [r] = f.fetch([target(site, "/docs/a")])
    assert r.links == (site.url("/docs/b"), site.url("/docs/c?q=1"))


def test_a_cpu_bound_crawl_narrows_to_one_request_in_flight() -> None:
    """The requests in flight follow the process's CPU share (`core/in_flight.py`): one that
    reports two CPU seconds a second is CPU-bound, and its crawl ends one request at a time."""
    pages = {f"/docs/p{i}": Page(f"<html><title>p{i}</title><p>body {i}</p></html>") for i in range(60)}
    busy = lambda: 2 * time.monotonic()  # noqa: E731
    with SiteServer(pages, delay_s=0.01) as site:  # answers slow enough for four to overlap
        src = Source(name="t", sitemap=site.url("/sitemap.xml"), fetch=policy(concurrency=4))
        with Fetcher(src, cpu=busy) as f:
            results = list(f.fetch([target(site, p) for p in pages]))
    assert {r.outcome for r in results} == {Outcome.OK} and len(results) == 60
    assert set(site.concurrent[-20:]) == {1}, site.concurrent
