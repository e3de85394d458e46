"""A bad minute of a site never replaces or deletes what the index holds: through `freshness
run` on loopback sites, a maintenance page served with 200 that varies per URL (on every
page and on 30% of them, right after the build and on a mature index), temporary 404s on
40% of the pages, a server sending its headers a line at a time (a page, on a reused
keep-alive connection, and a sitemap), a one-line install command on every page, deep
HTML, phantom and non-http sitemap URLs, settings that would fail every run, and a
forgiven typo still searchable. Each ends with no record lost or replaced, within its time
bound, with one message saying why; the next good run converges with no embedding."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
import yaml

from freshness_pipeline.adapters.fetch import Fetcher, Target
from freshness_pipeline.config import ConfigError, FetchPolicy, Source, load_settings
from freshness_pipeline.core.models import Outcome
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.pipeline.test_fetch_policy import Pipeline, html_pages, urlset
from freshness_pipeline_tests.pipeline.test_fuzzy import docs, long_section
from freshness_pipeline_tests.sitefixture import Page, SiteServer
from freshness_pipeline_tests.sitegen import generate

PAGES = 20


def maintenance(path: str) -> Page:
    """~480 characters that differ per URL in a few words: no title, heading, length or
    not-found rule reads it as an error page, and no two pages serve the same text."""
    rng = random.Random(path)
    words = " ".join(rng.choice(["alpha", "delta", "gamma", "orbit", "quartz", "sigma"]) for _ in range(4))
    return Page(
        f"<html><head><title>Docs</title></head><body><main><h1>Upgrade in progress for {path}</h1>"
        f"<p>Our documentation platform is moving the {path} page to a new release with faster search, "
        f"better navigation and refreshed examples. Reference {words}. Please come back in a few minutes; "
        "nothing you bookmarked will change, and every example keeps working as before. Thank you for "
        "your patience while the upgrade finishes on every server of the cluster.</p></main></body></html>"
    )


def held_messages(run: dict) -> list[str]:
    """The run's quarantine lines (one per kind)."""
    return [w for w in run["warnings"] if w.startswith("quarantine ")]


@pytest.mark.parametrize("share", [1.0, 0.3], ids=["every-page", "30pct"])
@pytest.mark.parametrize("quiet_runs", [0, 3], ids=["after-the-build", "mature-index"])
def test_a_maintenance_page_varying_per_url_is_held(
    share: float, quiet_runs: int, dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(PAGES, sections_per_page=2, seed=451)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server, fetch={"run_budget_s": 30.0})
        p.run()
        for _ in range(quiet_runs):
            assert p.run()["embedded"] == 0
        before = p.triples()

        hit = sorted(pages)[: int(share * PAGES)]
        server.pages = {**pages, **{path: maintenance(path) for path in hit}}
        started = time.monotonic()
        held = p.run()
        assert time.monotonic() - started < 30.0 + 5
        assert (held["embedded"], held["deleted"], held["upserted"], held["gone"]) == (0, 0, 0, 0), held
        assert (held["errors"], held["flagged"]) == (0, len(hit))  # held, no error
        (message,) = held_messages(held)
        assert message.startswith(f"quarantine collapsed: {len(hit)} held ({p.url(hit[0])}, "), message
        assert p.triples() == before
        assert {p.url(path) for path in hit} <= {u for u, _ in p.status()["flagged"]}  # flagged for review

        server.pages = pages  # over: nothing to repair
        back = p.run()
        assert (back["embedded"], back["deleted"], back["upserted"], back["errors"]) == (0, 0, 0, 0), back
        assert p.triples() == before


def test_a_rewrite_the_next_run_sees_again_is_taken(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Confirmation, not a threshold between guards: a real rewrite of 30% of the pages waits
    one run, then is indexed (like `missing_after`, for content)."""
    site, rewritten = generate(PAGES, sections_per_page=2, seed=452), generate(PAGES, sections_per_page=2, seed=453)
    pages, new = html_pages(site), html_pages(rewritten)
    hit = sorted(pages)[:6]
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        server.pages = {**pages, **{path: new[path] for path in hit}}
        held = p.run()
        assert (held["embedded"], held["errors"], held["flagged"]) == (0, 0, 6), held
        assert held_messages(held) == [
            f"quarantine rewritten: 6 held ({p.url(hit[0])}, {p.url(hit[1])}, "
            f"{p.url(hit[2])} and 3 more), 0 taken, 0 released; "
            "`freshness release --kind rewritten` takes them"
        ]
        taken = p.run()
        assert (taken["embedded"], taken["errors"], taken["flagged"]) == (12, 0, 0), taken
        assert held_messages(taken) == [
            f"quarantine rewritten: 0 held, 6 taken ({p.url(hit[0])}, {p.url(hit[1])}, "
            f"{p.url(hit[2])} and 3 more), 0 released"
        ]
        assert {t for t in p.triples() if t[0] in {p.url(h) for h in hit}} == {
            t for t in rewritten.expected(server.base_url) if t[0] in {p.url(h) for h in hit}
        }


def test_temporary_404s_on_40_percent_of_the_pages_delete_nothing(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(PAGES, sections_per_page=2, seed=454)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        before = p.triples()
        broken = sorted(pages)[:8]  # a bad deploy: 404, and gone from the sitemap
        server.pages = {
            path: Page("<h1>Not found</h1>", status=404) if path in broken else pg for path, pg in pages.items()
        }
        held = p.run()
        assert (held["gone"], held["deleted"], held["embedded"], held["errors"], held["flagged"]) == (0, 0, 0, 0, 8)
        (message,) = held_messages(held)
        assert message.startswith("quarantine gone: 8 held ("), message
        assert p.triples() == before

        server.pages = pages
        back = p.run()
        assert (back["embedded"], back["deleted"], back["upserted"], back["errors"]) == (0, 0, 0, 0), back
        assert p.triples() == before


def test_slow_headers_on_a_reused_connection_end_at_the_page_deadline() -> None:
    """The connection is forced to be a reused keep-alive one (one fetch thread, a page
    fetched on it first, no new connection made): the deadline ends its wait for headers."""
    pages = {f"/docs/{n}": Page(f"<html><title>{n}</title><p>{n} body</p></html>") for n in "ab"}
    with SiteServer(pages, drip_s=0.2) as site:
        src = Source(
            name="t",
            sitemap=site.url("/sitemap.xml"),
            fetch=FetchPolicy(timeout_s=10.0, max_retries=0, concurrency=1, page_deadline_s=2.0),
        )
        a, b = (Target(normalize_url(site.url(f"/docs/{n}")), site.url(f"/docs/{n}")) for n in "ab")
        with Fetcher(src) as f:
            assert [r.outcome for r in f.fetch([a])] == [Outcome.OK]
            site.faults["/docs/b"] = ["slow-headers"]
            connections, started = site.connections, time.monotonic()
            (r,) = f.fetch([b])
            took = time.monotonic() - started
        assert site.connections == connections  # the same connection: reused
        assert r.outcome is Outcome.ERROR and "over fetch.page_deadline_s (2s)" in (r.reason or ""), r.reason
        assert took < 2.0 + 1.0, took


def test_slow_headers_on_a_page_and_on_a_sitemap_are_bounded(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(6, sections_per_page=2, seed=455)
    pages = html_pages(site)
    with SiteServer(pages, drip_s=0.5) as server:
        fetch = {"page_deadline_s": 3.0, "run_budget_s": 20.0, "timeout_s": 10.0, "concurrency": 1}
        p = Pipeline(tmp_path, capsys, server, fetch=fetch)
        p.run()
        before = p.triples()

        server.faults["/guide/page0"] = ["slow-headers"] * 5
        started = time.monotonic()
        slow = p.run()
        assert time.monotonic() - started < 20.0 + 8
        assert (slow["errors"], slow["embedded"], slow["deleted"]) == (1, 0, 0), slow
        assert "over fetch.page_deadline_s (3s)" in slow["error_pages"][p.url("/guide/page0")]
        assert p.triples() == before
        server.faults.clear()

        # A sitemap sending its headers a line a second, past the run's budget: discovery
        # stops at the budget and says so; nothing changes.
        p.configure(fetch={**fetch, "page_deadline_s": 10.0, "run_budget_s": 4.0})
        server.faults["/sitemap.xml"] = ["slow-headers"] * 5
        started = time.monotonic()
        failed = p.run(ok=False)
        assert time.monotonic() - started < 4.0 + 8  # the budget, and the run's own start and end
        assert "the run's fetch.run_budget_s (4s) is spent" in failed["message"], failed
        assert p.triples() == before
        server.faults.clear()

        back = p.run()
        assert (back["embedded"], back["deleted"], back["errors"]) == (0, 0, 0), back


def test_a_one_line_command_on_every_page_is_content(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`<pre><code>` of one line is extracted as inline code: on every page, differing only
    in a digit, it was learned as template and removed everywhere."""
    site = generate(8, sections_per_page=1, seed=456)
    pages = {
        path: Page(
            pg.body.decode().replace(
                "</article>", f'<h2>Install</h2><pre><code>pip install "acme[extra{i}]"</code></pre></article>'
            )
        )
        for i, (path, pg) in enumerate(sorted(html_pages(site).items()))
    }
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        p.run()  # templates are learned from a crawl's texts: a second run applies them
        installs = {r["url"]: r["text"] for r in p.index() if r["heading_path"].endswith("Install")}
        assert len(installs) == 8 and all("pip install" in text for text in installs.values()), installs


DEEP = 300  # libxml2 stops at 256 without huge_tree


def deep_page(levels: int) -> Page:
    return Page(
        "<html><head><title>Deep</title></head><body><main><h1>Deep</h1><p>An introduction to the page.</p>"
        + "<div>" * levels
        + "<p>The nested paragraph holds the answer people search for.</p>"
        + "</div>" * levels
        + "<h2>After</h2><p>A sibling section after the nested block.</p></main></body></html>"
    )


def test_deep_html_is_parsed_whole_or_flagged(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SiteServer({"/deep": deep_page(DEEP)}) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        texts = " ".join(t for _, _, t in p.triples())
        assert "nested paragraph holds the answer" in texts and "sibling section after" in texts
        before = p.triples()

        server.pages["/deep"] = deep_page(2100)  # deeper than any parser option takes
        flagged = p.run()
        (why,) = dict(p.status()["flagged"]).values()
        assert "nested over 2048 levels deep" in why and flagged["embedded"] == flagged["deleted"] == 0
        assert p.triples() == before

        server.pages["/deep"] = deep_page(DEEP)
        back = p.run()
        assert (back["embedded"], back["deleted"]) == (0, 0)


def test_phantom_and_non_http_sitemap_urls_are_never_live(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(4, sections_per_page=1, seed=457)
    pages = html_pages(site)
    real = sorted(pages)
    phantoms = [f"/never/{i}" for i in range(30)]
    with SiteServer(pages, sitemap=None) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        odd = ["javascript:alert(1)", "mailto:docs@example.com", "data:text/html,hi", f"http://127.0.0.1:{port + 1}/x"]
        listing = urlset(server, real + phantoms)
        server.pages["/sitemap.xml"] = Page(
            listing.body.decode().replace(
                "</urlset>", "".join(f"<url><loc>{u}</loc></url>" for u in odd) + "</urlset>"
            ),
            content_type="application/xml",
            etag=None,
        )
        p = Pipeline(tmp_path, capsys, server)
        first = p.run()
        assert (first["new"], first["gone"], first["errors"]) == (4, 0, 0), first
        (refused,) = [w for w in first["warnings"] if "sitemap URLs refused" in w]
        assert refused == "4 sitemap URLs refused, not fetched: javascript:alert(1) (not an http(s) URL) and 3 more"
        assert held_messages(first) == []
        assert p.status()["pages_live"] == 4
        before = p.triples()

        server.pages["/sitemap.xml"] = urlset(server, real)  # fixed: nothing left to alarm about
        fixed = p.run()
        assert (fixed["errors"], fixed["skipped"], fixed["embedded"], fixed["deleted"]) == (0, 0, 0, 0), fixed
        assert p.triples() == before


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"fetch": {"contact": "ops@example.com\r\nX-Evil: 1"}}, "fetch.contact: is sent in the User-Agent header"),
        ({"sitemap": "https://bot:hunter2@docs.example.com/sitemap.xml"}, "sitemap: must not hold credentials"),
        ({"sitemap": None, "start_urls": ["docs.example.com"]}, "start_urls[0]: must be an absolute http(s) URL"),
    ],
    ids=["crlf-contact", "credentials-in-sitemap", "one-start-url"],
)
def test_settings_that_would_fail_every_run_fail_to_load(setting: dict, message: str, tmp_path: Path) -> None:
    source = {"name": "docs", "sitemap": "https://docs.example.com/sitemap.xml", **setting}
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [{k: v for k, v in source.items() if v is not None}]}))
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert f"source 'docs': {message}" in str(err.value) and "hunter2" not in str(err.value), err.value


def test_a_forgiven_typo_is_no_longer_searchable(dagster_home: Path) -> None:
    text = long_section()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs(text))
        fr.run()
        site.publish(docs(text.replace("recieves", "receives")))
        c = fr.run()
        assert (c["sections_fuzzy_unchanged"], c["embedded"]) == (1, 0), c
        (record,) = [r for r in fr.dump() if r["heading_path"] == "Uploads > Retries"]
        assert "receives" in record["retrieval_text"] and "recieves" not in record["retrieval_text"]
        hits = json.loads(fr.cli("search", "recieves", "-k", "3", "--json", "--explain"))
        assert not any("text #" in (h["explain"] or "") for h in hits), hits  # no full-text match left
