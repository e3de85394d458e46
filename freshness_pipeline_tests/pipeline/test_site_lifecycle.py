"""The index equals the site, through `freshness run` on a loopback site that misbehaves on
purpose: short real pages are indexed, soft 404s and 503s cost nothing, temporary and
site-wide redirects never detach or delete a live page, tier runs hold an outage, skipped
pages are counted, an unreachable start URL fails, each page is fetched once per run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.cli import main
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.defs.runner import run_refresh
from freshness_pipeline_tests.pipeline.test_fetch_policy import Pipeline, html_pages, urlset
from freshness_pipeline_tests.sitefixture import Page, SiteServer
from freshness_pipeline_tests.sitegen import generate

SHORT_PAGES = {
    "/about": ("About", "We build documentation tools. Founded 2019, based in Lyon."),  # 59 chars
    "/guide/": ("Guide", "Everything about running the pipeline: install, configure and run it daily."),
    "/api/ping": ("ping()", "Returns `pong`. Takes no arguments."),
    "/newsletter": ("Newsletter", "Monthly. No spam."),
    "/guide/auth-errors": (
        "Authentication errors",
        "A 401 means the token is missing. A 403 Forbidden (access denied) means it lacks a scope. "
        "A 404 page not found hides a resource you may not see.",
    ),
}


def short_page(title: str, text: str) -> Page:
    head = f"<head><title>{title}</title></head>"
    return Page(f"<html>{head}<body><main><h1>{title}</h1><p>{text}</p></main></body></html>")


def apology(path: str) -> Page:
    text = f"We searched everywhere for {path} but this address leads nowhere on our site. " * 4
    return Page(f"<html><head><title>Docs</title></head><body><main><p>{text}</p></main></body></html>")


def urls(p: Pipeline) -> set[str]:
    return {r["url"] for r in p.index()}


def test_short_real_pages_are_indexed_on_every_run(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(3, sections_per_page=2, seed=111)
    pages = html_pages(site) | {path: short_page(*tt) for path, tt in SHORT_PAGES.items()}
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server)
        for _ in range(2):
            run = p.run()
            assert run["flagged"] == 0, run["flagged_pages"]
            assert urls(p) == {p.url(path).rstrip("/") for path in pages}
        assert p.status()["flagged"] == []


def test_503s_and_soft_404s_embed_and_delete_nothing(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(100, sections_per_page=1, seed=112)
    with SiteServer(html_pages(site)) as server:
        # The site's own not-found page: a 200, long enough and titled so that no length or
        # title rule would catch it; only its fingerprint says what it is.
        server.not_found = apology("/the/address/you/asked")
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        before = p.triples()
        g = "/guide/page"
        for i in range(5):
            server.faults[f"{g}{i}"] = [503] * 10
        soft = server.pages[f"{g}50"]
        server.pages[f"{g}50"] = apology(f"{g}50")
        bad = p.run()
        assert (bad["embedded"], bad["deleted"], bad["errors"]) == (0, 0, 5)
        assert (bad["held"], bad["unchanged"]) == (1, 94)  # the soft 404's answer was not taken
        assert "not-found page" in bad["flagged_pages"][p.url(f"{g}50")]
        assert p.triples() == before
        server.faults.clear()
        server.pages[f"{g}50"] = soft
        after = p.run()
        assert (after["embedded"], after["deleted"], after["errors"], after["flagged"]) == (0, 0, 0, 0)
        assert p.triples() == before


def test_a_site_wide_maintenance_redirect_loses_nothing_even_with_a_release(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(10, sections_per_page=2, seed=113)
    with SiteServer(html_pages(site)) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        before = p.triples()
        # /maintenance is no page of the site (not in the sitemap): the fallback answer.
        server.not_found = short_page("Maintenance", "We will be back in a few minutes. " * 10)
        for path in html_pages(site):
            server.redirects[path] = (302, "/maintenance")
        held = p.run()
        assert (held["embedded"], held["deleted"], held["errors"], held["flagged"]) == (0, 0, 0, 10), held
        assert (held["crawled"], held["held"], held["unchanged"]) == (10, 10, 0)
        assert all(why.startswith("held: redirected") for why in held["flagged_pages"].values())
        assert [w for w in held["warnings"] if w.startswith("quarantine redirected: 10 held")], held["warnings"]
        assert p.triples() == before
        code = main(["--sources", str(p.sources), "release", "--json"])  # the kind is not releasable
        forced = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert code == 0 and (forced["embedded"], forced["deleted"]) == (0, 0)
        assert p.triples() == before

        server.redirects.clear()  # maintenance over: a normal run, no override
        server.not_found = None
        back = p.run()
        assert (back["embedded"], back["deleted"], back["errors"]) == (0, 0, 0)
        assert p.triples() == before == site.expected(server.base_url)


def test_dead_links_are_counted_apart_from_the_pages(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(10, sections_per_page=1, seed=118)
    pages = html_pages(site)
    listed = [*sorted(pages), "/guide/no-such-page"]  # a sitemap entry that 404s
    with SiteServer(pages, sitemap=None) as server:
        server.pages["/sitemap.xml"] = urlset(server, listed)
        p = Pipeline(tmp_path, capsys, server)
        first = p.run()
        assert (first["crawled"], first["new"], first["unchanged"], first["dead_links"]) == (11, 10, 0, 1), first
        server.pages.pop("/guide/page3")  # deleted, still listed
        second = p.run()
        assert (second["gone"], second["dead_links"], second["unchanged"]) == (1, 1, 9), second
        third = p.run()  # the deleted page, still listed, is a dead link now
        assert (third["gone"], third["dead_links"], third["unchanged"]) == (0, 2, 9), third
        assert urls(p) == {p.url(path) for path in pages if path != "/guide/page3"}


def test_a_temporary_redirect_keeps_the_page_under_its_own_url(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(10, sections_per_page=2, seed=114)
    with SiteServer(html_pages(site), sitemap=None) as server:
        server.pages["/sitemap.xml"] = urlset(server, sorted(server.pages))
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        before = p.triples()
        g = "/guide/page"
        server.pages["/moved/page-3"] = short_page("Elsewhere", "Some other text entirely. " * 20)
        server.redirects[g + "3"] = (302, "/moved/page-3")
        server.redirects[g + "4"] = (307, "/moved/page-4")  # a target that 404s
        run = p.run()
        assert (run["embedded"], run["deleted"]) == (0, 0)
        assert run["skipped"] == 2 and "temporary redirect" in run["skipped_pages"][p.url(g + "3")]
        assert p.triples() == before
        server.pages.pop("/moved/page-3")  # the target now 404s: the live page stays
        assert (p.run()["deleted"], p.triples()) == (0, before)
        server.redirects.clear()
        back = p.run()
        assert (back["embedded"], back["deleted"], back["skipped"]) == (0, 0, 0)
        assert p.triples() == before
        assert {p.pages()[p.url(g + n)].state for n in "34"} == {"live"}


def test_a_tier_run_during_a_whole_site_404_deletes_nothing(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(8, sections_per_page=1, seed=115)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server, tiers={"rules": [{"pattern": "/guide/page[01]$", "tier": "hot"}]})
        p.run()
        before = p.triples()
        for page in server.pages.values():
            page.status = 404
        server.sitemap = None  # the sitemap 404s too: discovery fails, nothing changes
        assert p.run(tier="hot", ok=False)["status"] == "failure"
        server.pages["/sitemap.xml"] = urlset(server, sorted(pages))  # a stale sitemap, still listing all
        # As the tier sensor launches it: a run tagged freshness/tier=hot.
        held = run_refresh("docs", tier="hot")
        assert held["status"] == "success", held
        assert (held["crawled"], held["gone"], held["deleted"], held["errors"], held["flagged"]) == (2, 0, 0, 0, 2)
        assert p.triples() == before


def test_skipped_pages_are_counted_and_visible(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(6, sections_per_page=1, seed=116)
    with SiteServer(html_pages(site), hang_s=3.0) as server:
        p = Pipeline(tmp_path, capsys, server, fetch={"max_bytes": 20_000})
        p.run()
        before = p.triples()
        server.faults["/robots.txt"] = [503] * 10  # robots.txt unreachable: RFC 9309 says skip all
        run = p.run()
        assert (run["skipped"], run["errors"], run["unchanged"], run["embedded"]) == (6, 0, 0, 0)
        assert all("robots.txt unreachable" in why for why in run["skipped_pages"].values())
        (check,) = [c for c in run["checks"] if c["name"] == "pages_not_checked"]
        assert check["severity"] == "ERROR" and "6 of 6 pages not checked" in check["description"]
        assert p.triples() == before
        (record,) = dg.DagsterInstance.get().fetch_materializations(dg.AssetKey("fetched_pages"), limit=1).records
        metadata = record.asset_materialization.metadata
        assert metadata["skipped"].value == 6 and any(
            "robots.txt unreachable" in r.data["reason"] for r in metadata["skipped_by_page"].records
        )
        freshness = p.status()["freshness"]
        assert freshness["error_share"] == 1.0 and freshness["score"] < 0.9  # unverified pages count

        server.faults.clear()
        g = "/guide/page"
        server.pages[g + "0"] = Page(b"%PDF-1.7 a manual", content_type="application/pdf")
        server.pages[g + "1"].html = str(server.pages[g + "1"].html) + "<!--" + "x" * 30_000 + "-->"
        code = main(["--sources", str(p.sources), "run"])
        line = capsys.readouterr().out
        assert code == 0 and "skipped: 2" in line and "check pages_not_checked: WARN" in line


def test_a_start_url_that_does_not_answer_with_a_page_fails_in_one_line(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = tmp_path / "sources.yaml"
    with SiteServer({"/docs/a": Page("<main>a page</main>")}) as server:
        # Connection refused (an unresolvable host takes the same path, httpx.ConnectError, but
        # would send a DNS query off this machine), and a mistyped path: a 404, no page to start from.
        for start, why in (
            ("http://127.0.0.1:9/docs/", "did not answer"),
            (server.url("/doc/"), "answered HTTP 404 not found: no page to discover links from"),
        ):
            entry = {"name": "docs", "start_urls": [start], "fetch": {"timeout_s": 2, "max_retries": 0}}
            sources.write_text(yaml.safe_dump({"sources": [entry], "embedder": {"provider": "hashing"}}))
            code = main(["--sources", str(sources), "run"])
            out = capsys.readouterr().out.strip().splitlines()
            assert code == 1
            failure = [line for line in out if line.strip().startswith("failure:")]
            assert len(failure) == 1 and f"start URL {start} {why}" in failure[0], out
            assert "nothing was changed" in failure[0]


def test_a_new_source_whose_discovery_finds_nothing_fails(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SiteServer({}) as server:
        p = Pipeline(tmp_path, capsys, server)
        failed = p.run(ok=False)
        assert failed["status"] == "failure" and "discovery found no pages" in failed["message"]


def test_link_discovery_fetches_each_page_once_per_run(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(4, sections_per_page=1, seed=117)
    pages = html_pages(site)
    links = "".join(f'<a href="{path}">{path}</a>' for path in pages)
    pages["/guide/"] = Page(f"<html><body><main><h1>Guide</h1><p>Start here.</p>{links}</main></body></html>")
    with SiteServer(pages, sitemap=None) as server:
        sources = tmp_path / "sources.yaml"
        entry = {"name": "docs", "start_urls": [server.url("/guide/")], "fetch": {"max_retries": 0}}
        sources.write_text(yaml.safe_dump({"sources": [entry], "embedder": {"provider": "hashing"}}))
        for expected_new in (5, 0):
            server.requests.clear()
            assert main(["--sources", str(sources), "run", "--json"]) == 0
            run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
            assert (run["status"], run["new"]) == ("success", expected_new), run
            requested = [path for _, path, _ in server.requests if path.startswith("/guide")]
            assert sorted(requested) == sorted(pages), requested  # each page once


def test_a_slow_drip_page_is_an_outage_not_a_hang(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(3, sections_per_page=1, seed=118)
    deadline_s, drip_s, drips = 4, 3.0, 5
    with SiteServer(html_pages(site), drip_s=drip_s) as server:
        p = Pipeline(tmp_path, capsys, server, fetch={"timeout_s": 10, "page_deadline_s": deadline_s})
        p.run()
        before = p.triples()
        started = time.monotonic()
        p.run()
        quiet = time.monotonic() - started  # a run's fixed costs on this host, now
        server.faults["/guide/page0"] = ["drip"] * drips
        started = time.monotonic()
        run = p.run()
        # Fixed costs plus the deadline: far below the drip of the page's whole body (a byte
        # every drip_s, about 50 minutes), which a fetch without the deadline would wait for.
        # The drips of five attempts on top leave room for a busy host's slower fixed costs.
        assert time.monotonic() - started < quiet + deadline_s + drip_s * drips
        assert (run["errors"], run["deleted"]) == (1, 0)
        assert "page_deadline_s" in run["error_pages"][p.url("/guide/page0")]
        assert p.triples() == before


def test_another_port_of_the_sitemaps_host_is_out_of_scope(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sitemap entry on another port of the same machine (another service) is refused,
    never fetched nor indexed; a bare host name in `fetch.allowed_hosts` allows its ports."""
    site = generate(2, sections_per_page=1, seed=120)
    other = {"/admin/secrets": short_page("Internal", "Another service on the same machine. " * 10)}
    with SiteServer(html_pages(site), sitemap=None) as server, SiteServer(other) as neighbour:
        foreign = neighbour.url("/admin/secrets")
        listed = [server.url(path) for path in html_pages(site)] + [foreign]
        server.pages["/sitemap.xml"] = Page(
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>{u}</loc></url>" for u in listed)
            + "</urlset>",
            content_type="application/xml",
        )
        p = Pipeline(tmp_path, capsys, server)  # allowed_hosts: by default the sitemap's host and port
        run = p.run()
        port = neighbour.base_url.rsplit(":", 1)[1]
        (refused,) = [w for w in run["warnings"] if w.startswith("1 sitemap URLs refused, not fetched: ")]
        assert f"refused: host 127.0.0.1:{port} is not in" in refused and run["errors"] == 0
        assert {r["url"] for r in p.index()} == {server.url(path) for path in html_pages(site)}
        assert neighbour.requests == []

        p.configure(fetch={"allowed_hosts": ["127.0.0.1"]})  # the machine, any port
        assert p.run()["errors"] == 0
        assert normalize_url(foreign) in {r["url"] for r in p.index()}


def test_off_scope_hosts_are_refused_with_the_reason_in_the_errors(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(2, sections_per_page=1, seed=119)
    with SiteServer(html_pages(site), sitemap=None) as server:
        foreign = server.url("/guide/page0").replace("127.0.0.1", "localhost")
        listed = [server.url(path) for path in html_pages(site)] + [foreign, "http://169.254.169.254/latest/"]
        server.pages["/sitemap.xml"] = Page(
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>{u}</loc></url>" for u in listed)
            + "</urlset>",
            content_type="application/xml",
        )
        p = Pipeline(tmp_path, capsys, server)  # allowed_hosts: by default the sitemap's host
        run = p.run()
        assert run["errors"] == 0  # refused at discovery, said once
        (refused,) = [w for w in run["warnings"] if w.startswith("2 sitemap URLs refused, not fetched: ")]
        assert "refused: host localhost:" in refused and refused.endswith(" and 1 more")
        assert {r["url"] for r in p.index()} == {server.url(path) for path in html_pages(site)}
        assert not any(h.get("host", "").startswith("localhost") for _, _, h in server.requests)

        p.configure(fetch={"allowed_hosts": ["127.0.0.1", "localhost", "169.254.169.254"]})  # a host, not an address
        run = p.run()
        (refused,) = [w for w in run["warnings"] if w.startswith("1 sitemap URLs refused, not fetched: ")]
        assert "is a cloud metadata address" in refused
