"""Every HTTP case through `freshness run` (Dagster, LanceDB, the hashing embedder) against
`SiteServer`, asserting what the index holds afterwards: nothing deleted on a bad minute,
gone pages deleted, moved pages remapped without duplicates or re-embedding."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.cli import main
from freshness_pipeline.config import load_settings, state_url
from freshness_pipeline.core.state import PageRow
from freshness_pipeline.demo.render import render
from freshness_pipeline_tests.sitefixture import Page, SiteServer
from freshness_pipeline_tests.sitegen import Site, generate, paragraph

Triple = tuple[str, str, str]  # (page URL, heading path, text)

# Fast failure paths: no real backoff, short timeouts.
FAST_FETCH = {"backoff_s": 0.01, "max_retries": 1, "timeout_s": 0.5, "max_retry_after_s": 1.0}


def html_pages(site: Site) -> dict[str, Page]:
    """`/guide/pageN` -> the page rendered like a static site generator would."""
    return {
        "/" + rel.removesuffix(".md"): Page(render(md, title=md.splitlines()[0][2:], nav={"/": "Home"}))
        for rel, md in site.markdown().items()
    }


class Pipeline:
    """`freshness run --json`, `dump`, `status --json` and `resolve` on one sources file."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], server: SiteServer, **source: Any) -> None:
        self.capsys, self.server, self.tmp_path = capsys, server, tmp_path
        self.sources = tmp_path / "sources.yaml"
        self.configure(**source)

    def configure(self, **source: Any) -> None:
        fetch = {**FAST_FETCH, **source.pop("fetch", {})}
        entry = {"name": "docs", "sitemap": self.server.url("/sitemap.xml"), "fetch": fetch, **source}
        self.sources.write_text(yaml.safe_dump({"sources": [entry], "embedder": {"provider": "hashing"}}))

    def _cli(self, *args: str) -> tuple[int, str]:
        code = main(["--sources", str(self.sources), *args])
        return code, self.capsys.readouterr().out

    def run(self, *, tier: str | None = None, ok: bool = True) -> dict[str, Any]:
        code, out = self._cli("run", "--json", *(["--tier", tier] if tier else []))
        result = json.loads(out.strip().splitlines()[-1])
        assert (code == 0) == ok, result
        return result

    def index(self) -> list[dict[str, Any]]:
        code, out = self._cli("dump")
        assert code == 0
        records = [json.loads(line) for line in out.splitlines() if line.strip()]
        triples = [(r["url"], r["heading_path"], r["text"]) for r in records]
        assert len(triples) == len(set(triples)), "duplicate records in the index"
        return records

    def triples(self) -> set[Triple]:
        return {(r["url"], r["heading_path"], r["text"]) for r in self.index()}

    def status(self) -> dict[str, Any]:
        code, out = self._cli("status", "--json")
        assert code == 0
        return json.loads(out)[0]

    def resolve(self, key: str) -> dict[str, Any]:
        code, out = self._cli("resolve", key, "--json")
        assert code == 0, out
        return json.loads(out)

    def pages(self) -> dict[str, PageRow]:
        store = StateStore(state_url(load_settings(self.sources)))
        try:
            return store.pages.load("docs", with_markdown=False)
        finally:
            store.close()

    def url(self, path: str) -> str:
        return self.server.url(path)


def urlset(server: SiteServer, paths: list[str], lastmod: dict[str, str] | None = None) -> Page:
    """A hand-written `/sitemap.xml` (served as a page, so it can leave pages out)."""
    entries = "".join(
        f"<url><loc>{server.url(p)}</loc>"
        + (f"<lastmod>{lastmod[p]}</lastmod>" if lastmod and p in lastmod else "")
        + "</url>"
        for p in paths
    )
    xml = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    return Page(xml, content_type="application/xml", etag=None)


def without(expected: set[Triple], *urls: str) -> set[Triple]:
    return {t for t in expected if t[0] not in urls}


def test_a_bad_minute_deletes_nothing_and_gone_pages_go(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(14, sections_per_page=3, seed=14)
    with SiteServer(html_pages(site), hang_s=2.0) as server:
        p = Pipeline(tmp_path, capsys, server, fetch={"max_bytes": 20_000})
        first = p.run()
        assert (first["crawled"], first["new"], first["embedded"]) == (14, 14, 42)
        expected = site.expected(server.base_url)
        assert p.triples() == expected

        g = "/guide/page"
        server.faults[g + "0"] = [503] * 10  # persistent 5xx
        server.faults[g + "1"] = [502, 200]  # a burst, answered on the retry
        server.faults[g + "2"] = [("429", 0.05)] * 10  # rate limited, with Retry-After
        server.faults[g + "3"] = ["hang"] * 4  # past the timeout
        server.pages[g + "4"] = Page(
            "<html><head><title>Page not found</title></head><body><main><p>Sorry.</p></main></body></html>"
        )
        server.pages[g + "5"] = Page("<html><body><main><p>Loading</p></main></body></html>")  # near-empty
        server.pages[g + "6"] = Page(
            "<html><head><title>Just a moment...</title></head><body>Checking your browser before accessing. "
            "Cloudflare Ray ID: 7d</body></html>"
        )
        server.pages[g + "7"] = Page(b"\x00\xff\xfe<<<<\x89PNG garbage </ht")  # extraction yields nothing
        server.pages["/guide/new-wall"] = Page(
            "<html><head><title>Captcha</title></head><body><p>Are you a robot?</p></body></html>"
        )
        server.pages[g + "8"].status = 404
        server.pages[g + "9"].status = 410
        server.robots = f"User-agent: *\nDisallow: {g}10\n"
        server.pages[g + "11"] = Page(b"%PDF-1.7 a manual", content_type="application/pdf")
        server.pages[g + "12"].html = server.pages[g + "12"].html + "<!--" + "x" * 30_000 + "-->"

        second = p.run()
        assert second["status"] == "success"
        assert (second["gone"], second["deleted"], second["embedded"]) == (2, 6, 0)
        assert second["errors"] == 3  # 5xx, 429, timeout; the burst recovered
        assert p.triples() == without(expected, p.url(g + "8"), p.url(g + "9"))

        flagged = dict(map(tuple, p.status()["flagged"]))
        assert set(flagged) == {p.url(g + str(i)) for i in (4, 5, 6, 7)} | {p.url("/guide/new-wall")}
        assert "captcha" in flagged[p.url("/guide/new-wall")]  # flagged, though it never had text
        assert "404" in flagged[p.url(g + "4")] and "near-empty" in flagged[p.url(g + "5")]
        assert "bot wall" in flagged[p.url(g + "6")]
        pages = p.pages()
        assert pages[p.url(g + "0")].reason.startswith("HTTP 503")
        assert pages[p.url(g + "2")].reason.startswith("HTTP 429")
        assert "timeout" in pages[p.url(g + "3")].reason
        for i, why in ((10, "robots.txt"), (11, "application/pdf"), (12, "max_bytes")):
            row = pages[p.url(g + str(i))]
            assert (row.state, row.outcome) == ("live", "skipped") and why in row.reason
        assert {pages[p.url(g + n)].state for n in ("8", "9")} == {"gone"}

        # The site recovers: the same text comes back, nothing is re-embedded.
        for i in (4, 5, 6, 7, 11, 12):
            server.pages[g + str(i)] = html_pages(site)[g + str(i)]
        server.robots = None
        server.faults.clear()
        server.pages.pop("/guide/new-wall")
        third = p.run()
        assert (third["embedded"], third["deleted"], third["errors"]) == (0, 0, 0)
        assert p.triples() == without(expected, p.url(g + "8"), p.url(g + "9"))
        assert p.status()["flagged"] == []


def test_redirects_move_sections_without_duplicates_or_embedding(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(6, sections_per_page=3, seed=6)
    with SiteServer(html_pages(site)) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        expected = site.expected(server.base_url)
        old_keys = {r["url"]: r["key"] for r in p.index()}
        g = "/guide/page"

        server.pages["/guide/moved0"] = server.pages.pop(g + "0")  # 301, target in the sitemap
        server.redirects[g + "0"] = (301, "/guide/moved0")
        server.pages["/guide/moved1"] = server.pages.pop(g + "1")  # a chain: 308 then 301
        server.redirects[g + "1"] = (308, "/tmp/hop")
        server.redirects["/tmp/hop"] = (301, "/guide/moved1")
        server.redirects[g + "2"] = (301, "/loop/a")  # a loop; page2 is still in the sitemap
        server.redirects["/loop/a"] = (302, g + "2")
        server.pages.pop(g + "3")  # merged into page4, which already exists
        server.redirects[g + "3"] = (301, g + "4")

        second = p.run()
        assert second["status"] == "success"
        assert second["embedded"] == 0  # pure moves reuse their vectors
        assert second["errors"] == 1  # the loop
        now = {t for t in expected if t[0] not in (p.url(g + "0"), p.url(g + "1"), p.url(g + "3"))}
        now |= {(p.url(f"/guide/moved{i}"), h, t) for (u, h, t) in expected for i in (0, 1) if u == p.url(g + str(i))}
        assert p.triples() == now
        assert p.pages()[p.url(g + "2")].reason.startswith("redirect loop")

        moved = p.resolve(old_keys[p.url(g + "0")])
        assert moved["url"] == p.url("/guide/moved0") and moved["redirects"] == [old_keys[p.url(g + "0")]]
        assert p.resolve(old_keys[p.url(g + "1")])["url"] == p.url("/guide/moved1")

        third = p.run()
        assert (third["embedded"], third["deleted"], third["upserted"]) == (0, 0, 0)
        assert p.triples() == now


def test_known_pages_missing_from_the_sitemap_are_rechecked(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(5, sections_per_page=3, seed=5)
    with SiteServer(html_pages(site), sitemap=None, hang_s=2.0) as server:
        paths = sorted(server.pages)
        server.pages["/sitemap.xml"] = urlset(server, paths)
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        expected = site.expected(server.base_url)
        assert p.triples() == expected

        g = "/guide/page"
        server.pages["/sitemap.xml"] = urlset(server, [g + "3", g + "4"])
        server.faults[g + "1"] = [503] * 100  # unlisted and 5xx
        server.faults[g + "2"] = ["hang"] * 100  # unlisted and no answer in time
        # page0: unlisted but still answering 200
        for run in range(1, 3):
            result = p.run()
            assert (result["gone"], result["deleted"]) == (0, 0), f"miss {run}"
            assert p.triples() == expected
        assert {p.pages()[p.url(g + n)].miss_count for n in "12"} == {2}
        third = p.run()
        assert third["gone"] == 2 and third["deleted"] == 6
        assert p.triples() == without(expected, p.url(g + "1"), p.url(g + "2"))
        assert p.pages()[p.url(g + "0")].state == "live"

        # An unreadable sitemap fails the run, names it, and changes nothing.
        server.pages["/sitemap.xml"] = Page("<urlset", content_type="application/xml")
        failed = p.run(ok=False)
        assert failed["status"] == "failure"
        assert "'docs'" in failed["message"] and p.url("/sitemap.xml") in failed["message"]
        assert p.triples() == without(expected, p.url(g + "1"), p.url(g + "2"))


def test_changing_etags_and_304s_cost_no_extraction_and_no_embedding(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(5, sections_per_page=3, seed=55)
    with SiteServer(html_pages(site), etags="random") as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        expected = site.expected(server.base_url)

        quiet = p.run()  # a new ETag on every answer, the same bytes
        assert (quiet["embedded"], quiet["upserted"], quiet["changed"]) == (0, 0, 0)
        pages = [r for r in p.pages().values() if r.url.startswith(p.url("/guide"))]
        assert {(r.outcome, r.reason) for r in pages} == {("not_modified", "body unchanged (same sha256)")}

        server.etags = "auto"
        p.run()  # the stored ETag is the last random one: bytes compared, validators refreshed
        server.requests.clear()
        real_304 = p.run()
        assert real_304["embedded"] == 0
        assert {r.outcome for r in p.pages().values()} == {"not_modified"}
        assert all(r.reason.startswith("HTTP 304") for r in p.pages().values())
        assert all("if-none-match" in h for _, path, h in server.requests if path.startswith("/guide"))

        # Every page's stored text survived the 304 runs: a full re-index rebuilds it all.
        p.configure(chunking={"token_budget": 300})
        reindex = p.run()
        assert reindex["status"] == "success" and reindex["embedded"] == 0
        assert p.triples() == expected


def test_tier_runs_fetch_their_tier_and_pages_whose_lastmod_is_newer(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(4, sections_per_page=2, seed=4)
    hot = generate(2, sections_per_page=2, seed=40)
    site.pages |= {f"guide/hot{i}.md": sections for i, sections in enumerate(hot.pages.values())}
    with SiteServer(html_pages(site), sitemap=None) as server:
        g = "/guide/page"
        server.pages["/sitemap.xml"] = urlset(server, sorted(server.pages))
        p = Pipeline(tmp_path, capsys, server, tiers={"rules": [{"pattern": "/guide/hot", "tier": "hot"}]})
        p.run()
        expected = site.expected(server.base_url)
        assert {r.tier for u, r in p.pages().items() if "/hot" in u} == {"hot"}

        for rel in ("guide/hot0.md", "guide/page0.md", "guide/page1.md"):
            site.pages[rel][0] = (site.pages[rel][0][0], paragraph(random.Random(rel)))
        edited = html_pages(site)
        for path in ("/guide/hot0", g + "0", g + "1"):
            server.pages[path] = edited[path]
        # page1 says it changed (lastmod after its last fetch); page3 drops out of the sitemap.
        tomorrow = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86_400))
        listed = [u for u in sorted(server.pages) if u not in (g + "3", "/sitemap.xml")]
        server.pages["/sitemap.xml"] = urlset(server, listed, {g + "1": tomorrow, g + "2": "2001-01-01"})
        server.requests.clear()

        hot_run = p.run(tier="hot")
        fetched = {path for _, path, _ in server.requests if path.startswith("/guide")}
        assert fetched == {"/guide/hot0", "/guide/hot1", g + "1"}
        assert (hot_run["changed"], hot_run["gone"], hot_run["embedded"]) == (2, 0, 2)
        now = site.expected(server.base_url)
        assert p.triples() == {t for t in now if t[0] != p.url(g + "0")} | {
            t for t in expected if t[0] == p.url(g + "0")
        }
        assert p.pages()[p.url(g + "3")].miss_count == 0  # not in this tier: not missing

        full = p.run()
        assert (full["changed"], full["gone"]) == (1, 0)
        assert p.triples() == now
