"""The fetcher's bounds on a loopback site: robots.txt rules as RFC 9309 reads them, bytes
decoded without a declared charset, a deadline per page and a budget per run against a
slow-drip server, hosts in scope and no private addresses, bounded sitemaps, temporary
redirects told from moves, and unreachable start URLs."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from freshness_pipeline.adapters.fetch import AHEAD, DiscoveryError, Fetcher, Target
from freshness_pipeline.config import ConfigError, DiscoveryPolicy, FetchPolicy, Source, load_settings
from freshness_pipeline.core.models import Outcome
from freshness_pipeline.core.urls import normalize_url, unsafe_address
from freshness_pipeline_tests.sitefixture import Page, SiteServer

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
FAST: dict[str, Any] = {"timeout_s": 10.0, "backoff_s": 0.01, "max_retries": 1}


@pytest.fixture
def site() -> Iterator[SiteServer]:
    pages = {f"/docs/{name}": Page(f"<html><title>{name}</title><p>{name} body</p></html>") for name in "abc"}
    with SiteServer(pages, drip_s=3.0) as server:
        yield server


def source(site: SiteServer, discovery: dict[str, Any] | None = None, **fetch: Any) -> Source:
    return Source(
        name="t",
        sitemap=site.url("/sitemap.xml"),
        fetch=FetchPolicy(**{**FAST, **fetch}),
        discovery=DiscoveryPolicy(**(discovery or {})),
    )


def fetch(site: SiteServer, *paths_or_urls: str, **fetch_policy: Any) -> dict[str, Any]:
    with Fetcher(source(site, **fetch_policy)) as f:
        targets = [Target(normalize_url(site.url(p)), site.url(p)) for p in paths_or_urls]
        return {r.url: r for r in f.fetch(targets)}


def one(site: SiteServer, path: str, **fetch_policy: Any) -> Any:
    (result,) = fetch(site, path, **fetch_policy).values()
    return result


def test_robots_wildcards_and_a_fractional_crawl_delay(site: SiteServer) -> None:
    site.pages["/docs/a.pdf"] = Page("<p>pdf-ish</p>")
    site.pages["/docs/a.pdfx"] = Page("<p>not a pdf</p>")
    site.pages["/docs/search"] = Page("<p>search</p>")
    site.robots = "User-agent: *\nDisallow: /*?\nDisallow: /*.pdf$\nCrawl-delay: 0.25\n"
    got = fetch(site, "/docs/a.pdf", "/docs/a.pdfx", "/docs/search")
    by_path = {u.rsplit("/", 1)[1]: r for u, r in got.items()}
    assert by_path["a.pdf"].outcome is Outcome.SKIPPED and "robots.txt" in by_path["a.pdf"].reason
    assert by_path["a.pdfx"].outcome is Outcome.OK
    assert by_path["search"].outcome is Outcome.OK
    query = one(site, "/docs/search?q=1")  # the identity drops the query; the request has it
    assert query.outcome is Outcome.SKIPPED and "robots.txt" in query.reason
    started = time.monotonic()
    fetch(site, "/docs/a", "/docs/b", "/docs/c")
    assert time.monotonic() - started >= 0.5  # three starts 0.25 s apart


def test_a_page_without_a_charset_is_decoded_from_its_bytes(site: SiteServer) -> None:
    text = "Café naïve résumé, déjà vu à la carte. " * 20
    body = f"<html><body><p>{text}</p></body></html>".encode("cp1252")
    site.pages["/docs/latin"] = Page(body, content_type="text/html")  # no charset anywhere
    r = one(site, "/docs/latin")
    assert r.outcome is Outcome.OK and "Café naïve résumé" in r.html and "\ufffd" not in r.html


def test_a_slow_drip_page_costs_at_most_its_deadline(site: SiteServer) -> None:
    site.faults["/docs/a"] = ["drip"] * 5  # one byte every 3 s, each under timeout_s (10 s)
    started = time.monotonic()
    r = one(site, "/docs/a", page_deadline_s=4.0)
    took = time.monotonic() - started
    assert r.outcome is Outcome.ERROR and "page_deadline_s" in r.reason
    assert took < 4.0 + 1.0, took


def test_not_modified_answers_keep_their_connection(site: SiteServer) -> None:
    """An unread 304 made httpx drop its connection: every conditional request of a quiet
    crawl paid a new TCP (on a real site, TLS) handshake."""
    for i in range(30):
        site.pages[f"/docs/p{i}"] = Page(f"<html><title>p{i}</title><p>page {i}</p></html>")
    paths = [f"/docs/p{i}" for i in range(30)]
    with Fetcher(source(site, concurrency=2)) as f:
        first = {r.url: r for r in f.fetch([Target(normalize_url(site.url(p)), site.url(p)) for p in paths])}
        again = [Target(u, u, r.etag, r.last_modified, r.body_sha256) for u, r in first.items()]
        before = site.connections
        second = list(f.fetch(again))
    assert {r.outcome for r in second} == {Outcome.NOT_MODIFIED}
    assert site.connections - before <= 2, site.connections - before  # at most one per fetch thread


def test_page_deadlines_share_one_thread(site: SiteServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline per page, not a thread per page; the drip tests show they still fire."""
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    for i in range(40):
        site.pages[f"/docs/q{i}"] = Page(f"<p>q{i}</p>")
    got = fetch(site, *[f"/docs/q{i}" for i in range(40)], concurrency=1)
    assert {r.outcome for r in got.values()} == {Outcome.OK}
    assert len(started) <= 3, started  # the one fetch thread, at most the shared deadline watch


def test_the_run_budget_skips_what_is_left_instead_of_waiting(site: SiteServer) -> None:
    site.faults["/docs/a"] = ["drip"] * 5
    started = time.monotonic()
    got = fetch(site, "/docs/a", "/docs/b", "/docs/c", concurrency=1, page_deadline_s=2.0, run_budget_s=1.0)
    assert time.monotonic() - started < 2.0 + 1.0
    outcomes = sorted((r.outcome.value, "run_budget_s" in r.reason) for r in got.values())
    # /docs/a ran into its deadline (or the budget, if it was not first); the rest were not started.
    assert outcomes.count(("skipped", True)) >= 2, outcomes


def test_hosts_outside_the_source_are_refused(site: SiteServer) -> None:
    foreign = site.url("/docs/a").replace("127.0.0.1", "localhost")  # the same server, another host
    site.redirects["/docs/away"] = (301, foreign)
    with Fetcher(source(site)) as f:
        targets = [Target(normalize_url(foreign), foreign), Target("x", site.url("/docs/away"))]
        got = {r.url: r for r in f.fetch(targets)}
    direct = got[normalize_url(foreign)]
    assert direct.outcome is Outcome.ERROR
    port = site.base_url.rsplit(":", 1)[1]
    assert (
        f"refused: host localhost:{port} is not in the source's fetch.allowed_hosts (127.0.0.1:{port})" in direct.reason
    )
    assert got["x"].outcome is Outcome.ERROR and "refused: host localhost" in got["x"].reason
    assert not any(h.get("host", "").startswith("localhost") for _, _, h in site.requests)  # never asked
    allowed = one(site, "/docs/away", allowed_hosts=["127.0.0.1", "localhost"])
    assert allowed.outcome is Outcome.OK


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("169.254.10.1", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("127.0.0.1", None),
        ("::1", None),
        ("93.184.216.34", None),
    ],
)
def test_address_kinds(address: str, kind: str | None) -> None:
    assert unsafe_address(address) == kind


def test_private_and_metadata_addresses_are_refused_before_connecting(site: SiteServer) -> None:
    site.redirects["/docs/meta"] = (302, "http://169.254.169.254/latest/meta-data/")
    r = one(site, "/docs/meta", allowed_hosts=["127.0.0.1", "169.254.169.254"])
    assert r.outcome is Outcome.ERROR and "cloud metadata" in r.reason and "allow_private_addresses" in r.reason


def test_temporary_redirects_are_not_moves(site: SiteServer) -> None:
    for status in (301, 302, 303, 307, 308):
        site.redirects[f"/docs/r{status}"] = (status, "/docs/b")
    got = fetch(site, *(f"/docs/r{s}" for s in (301, 302, 303, 307, 308)))
    moves = {u.rsplit("r", 1)[1]: (r.final_url is not None, r.temporary) for u, r in got.items()}
    permanent, temporary = (True, False), (True, True)
    assert moves == {"301": permanent, "308": permanent, "302": temporary, "303": temporary, "307": temporary}
    site.redirects["/docs/chain"] = (301, "/docs/hop")
    site.redirects["/docs/hop"] = (302, "/docs/b")
    assert one(site, "/docs/chain").temporary  # one temporary hop makes the chain temporary


def nested_index(site: SiteServer, fanout: int, depth: int, prefix: str = "/sm") -> None:
    """`/sitemap.xml`: an index `depth` levels deep, each index listing `fanout` children."""

    def build(path: str, level: int) -> None:
        if level == depth:
            entry = f"<url><loc>{site.url('/docs/a')}</loc></url>"
            site.pages[path] = Page(f'<urlset xmlns="{NS}">{entry}</urlset>', content_type="application/xml", etag=None)
            return
        children = [f"{prefix}{path.replace('/', '-')}-{i}.xml" for i in range(fanout)]
        locs = "".join(f"<sitemap><loc>{site.url(c)}</loc></sitemap>" for c in children)
        site.pages[path] = Page(
            f'<sitemapindex xmlns="{NS}">{locs}</sitemapindex>',
            content_type="application/xml",
            etag=None,
        )
        for child in children:
            build(child, level + 1)

    site.sitemap = None
    build("/sitemap.xml", 0)


def test_sitemap_fan_out_is_capped_and_said(site: SiteServer) -> None:
    nested_index(site, fanout=6, depth=3)  # 1 + 6 + 36 + 216 files
    with Fetcher(source(site, discovery={"max_sitemaps": 20})) as f:
        found = f.discover()
    sitemap_requests = sum(1 for _, p, _ in site.requests if p.endswith(".xml"))
    assert sitemap_requests == 20
    # Said once, with a count, not once per sitemap left unread.
    (said,) = [w for w in found.warnings if "discovery.max_sitemaps (20)" in w]
    assert re.fullmatch(r"\d+ sitemaps over discovery\.max_sitemaps \(20\) not read: http\S+ and \d+ more", said), said


def test_discovery_spends_the_run_budget(site: SiteServer) -> None:
    """Sitemaps that answer slowly stop discovery at `run_budget_s`, as a `DiscoveryError`
    (a partial list would make the pages it missed look gone), instead of taking
    `page_deadline_s` per sitemap."""
    site.sitemap, site.sitemap_children, site.hang_s = "index", 12, 1.0
    site.pages["/docs/a"] = Page("<p>a</p>")
    for i in range(12):
        site.faults[f"/sitemap-{i}.xml.gz"] = ["hang"]
    started = time.monotonic()
    with (
        Fetcher(source(site, page_deadline_s=5.0, run_budget_s=1.5)) as f,
        pytest.raises(DiscoveryError, match=r"fetch\.run_budget_s \(1\.5s\) is spent"),
    ):
        f.discover()
    assert time.monotonic() - started < 1.5 + 1.5  # twelve hanging sitemaps would take 12 s


def test_a_sitemap_chain_deeper_than_the_cap_is_said(site: SiteServer) -> None:
    nested_index(site, fanout=1, depth=6)
    with Fetcher(source(site, discovery={"max_sitemap_depth": 4})) as f:
        found = f.discover()
    assert found.urls == [] and any("deeper than discovery.max_sitemap_depth (4)" in w for w in found.warnings)
    with Fetcher(source(site, discovery={"max_sitemap_depth": 6})) as f:
        assert f.discover().urls == [site.url("/docs/a")]


@pytest.mark.parametrize("obey_robots", [True, False])
def test_an_unreachable_start_url_fails_discovery(obey_robots: bool) -> None:
    # Connection refused; an unresolvable host is the same httpx.ConnectError, not tried
    # here because it would send a DNS query off this machine.
    start = "http://127.0.0.1:9/docs/"
    fetch = FetchPolicy(**{**FAST, "timeout_s": 2.0, "obey_robots": obey_robots})
    src = Source(name="t", start_urls=[start], fetch=fetch)
    with Fetcher(src) as f, pytest.raises(DiscoveryError, match=f"start URL {start} did not answer"):
        f.discover()


@pytest.mark.parametrize("status", [404, 410])
def test_a_start_url_that_is_no_page_fails_discovery(site: SiteServer, status: int) -> None:
    site.pages["/docs/"] = Page('<a href="/docs/a">a</a>', status=status)  # a mistyped path, a removed page
    start = site.url("/docs/")
    src = Source(name="t", start_urls=[start], fetch=FetchPolicy(**FAST))
    with Fetcher(src) as f, pytest.raises(DiscoveryError, match=f"start URL {start} answered HTTP {status}"):
        f.discover()


def test_a_start_url_that_is_no_page_beside_one_that_is_is_a_warning(site: SiteServer) -> None:
    site.pages["/docs/"] = Page('<a href="/docs/a">a</a>')
    site.pages["/docs/a"] = Page("a page")
    gone = site.url("/docs/old/")  # 404: the site removed it, or the path is mistyped
    src = Source(name="t", start_urls=[site.url("/docs/"), gone], fetch=FetchPolicy(**FAST))
    with Fetcher(src) as f:
        found = f.discover()
    assert normalize_url(site.url("/docs/a")) in {normalize_url(u) for u in found.urls}
    assert found.warnings == [
        f"start URL {gone} answered HTTP 404 not found: no links discovered from it; correct start_urls"
    ]


def test_link_discovery_answers_are_reused(site: SiteServer) -> None:
    site.pages["/docs/"] = Page('<a href="/docs/a">a</a> <a href="/docs/b">b</a> <a href="c">c</a>')
    src = Source(name="t", start_urls=[site.url("/docs/")], fetch=FetchPolicy(**FAST))
    with Fetcher(src) as f:
        found = f.discover()
    answered = {normalize_url(site.url(p)) for p in ("/docs/", "/docs/a", "/docs/b", "/docs/c")}
    assert found.answered() == answered
    a = found.answer(normalize_url(site.url("/docs/a")))
    assert a is not None and a.outcome is Outcome.OK and a.html is not None and "a body" in a.html
    assert found.answer(normalize_url(site.url("/docs/a"))) is None  # handed out once
    assert {p: site.paths_requested(p) for p in ("/docs/a", "/docs/b", "/docs/c")} == {
        "/docs/a": 1,
        "/docs/b": 1,
        "/docs/c": 1,
    }


@pytest.mark.parametrize(
    ("section", "setting", "value"),
    [
        ("fetch", "page_deadline_s", 0),
        ("fetch", "run_budget_s", -1),
        ("fetch", "missing_after", 0),
        ("discovery", "max_sitemaps", 0),
        ("discovery", "max_sitemap_depth", -1),
    ],
)
def test_the_bounds_reject_nonsense_at_load_time(tmp_path: Path, section: str, setting: str, value: float) -> None:
    path = tmp_path / "sources.yaml"
    entry = {"name": "d", "sitemap": "http://127.0.0.1/sitemap.xml", section: {setting: value}}
    path.write_text(yaml.safe_dump({"sources": [entry]}))
    with pytest.raises(ConfigError, match=rf"source 'd': {section}\.{setting}: "):
        load_settings(path)


def test_a_name_that_resolves_to_a_refused_address_is_caught_at_connect(
    site: SiteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loopback is the only address a test can serve on, so for this test it counts as
    # private: the name is resolved by the system, connected to, and the peer refused.
    from freshness_pipeline.adapters import scope

    monkeypatch.setattr(scope, "unsafe_address", lambda a: "private" if a in ("127.0.0.1", "::1") else None)
    by_name = site.url("/docs/a").replace("127.0.0.1", "localhost")
    with Fetcher(source(site, allowed_hosts=["localhost"], obey_robots=False)) as f:
        (r,) = f.fetch([Target(normalize_url(by_name), by_name)])
    assert r.outcome is Outcome.ERROR and "is a private address" in r.reason and "allow_private_addresses" in r.reason
    assert site.paths_requested("/docs/a") == 0  # refused before the request was sent
    with Fetcher(source(site, allowed_hosts=["localhost"], obey_robots=False, allow_private_addresses=True)) as f:
        (r,) = f.fetch([Target(normalize_url(by_name), by_name)])
    assert r.outcome is Outcome.OK


def test_a_slow_reader_holds_a_window_of_pages_not_the_site() -> None:
    """Fetching runs ahead of the reader (extraction) by `AHEAD` answers per thread at most:
    with every target submitted at once, 100,000 pages waited in memory for extraction."""
    pages = {f"/docs/p{i}": Page(f"<html><title>p{i}</title><p>body {i}</p></html>") for i in range(300)}
    with SiteServer(pages) as site, Fetcher(source(site, concurrency=2)) as f:
        answers = f.fetch([Target(normalize_url(site.url(p)), site.url(p)) for p in pages])
        first = next(answers)
        time.sleep(1.0)  # the fetch threads would download the whole site meanwhile
        fetched = sum(site.paths_requested(p) for p in pages)
        assert fetched <= 2 * AHEAD + 2, f"{fetched} pages fetched ahead of a reader that took one"
        rest = list(answers)
    assert {first.url, *(r.url for r in rest)} == {normalize_url(site.url(p)) for p in pages}
    assert all(r.outcome is Outcome.OK for r in [first, *rest])
