"""The quarantine alone keeps a bad minute out of the index: through `freshness run` on a
loopback site of 100 pages, with the `change_spike` check off, a maintenance page served
with HTTP 200 and naming each page's URL (per URL, and per run) on 15%, 19% and 40% of the
pages, lasting one, two and three runs, and on 10% more pages each run for four runs. Each
run loses and replaces no record, is no error, and says so in one line naming the pages;
when the site comes back, it is taken at 0 embeds and nothing stays held."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from freshness_pipeline.cli import main
from freshness_pipeline.core.quarantine import Kind
from freshness_pipeline_tests.pipeline.test_fetch_policy import Pipeline, html_pages
from freshness_pipeline_tests.sitefixture import Page, SiteServer
from freshness_pipeline_tests.sitegen import generate

PAGES = 100
NO_SPIKE = {"checks": {"spike_min_share": 1.0}}  # the quarantine alone must hold


def maintenance(url: str, run: int) -> Page:
    """A maintenance page naming the URL asked for, with a few words and a time of its own."""
    rng = random.Random(f"{url} {run}")
    words = " ".join(rng.choice(["alpha", "delta", "gamma", "orbit", "quartz", "sigma"]) for _ in range(4))
    return Page(
        f"<html><head><title>Docs</title></head><body><main><h1>Upgrade in progress</h1>"
        f"<p>Our documentation platform is moving {url} to a new release with faster search, better "
        f"navigation and refreshed examples. Reference {words}, back at 10:{run:02d} UTC. Please come back "
        "in a few minutes; nothing you bookmarked will change, and every example keeps working as before. "
        "Thank you for your patience while the upgrade finishes on every server.</p></main></body></html>"
    )


def quarantine_lines(run: dict[str, Any]) -> list[str]:
    return [w for w in run["warnings"] if w.startswith("quarantine ")]


def assert_held(p: Pipeline, run: dict[str, Any], hit: list[str], before: set[Any], runs: int) -> None:
    """Nothing lost or replaced, no error, one line naming the pages, each page's state."""
    assert (run["embedded"], run["deleted"], run["upserted"], run["gone"], run["errors"]) == (0, 0, 0, 0, 0), run
    urls = sorted(p.url(path) for path in hit)
    more = f" and {len(urls) - 3} more" if len(urls) > 3 else ""
    assert quarantine_lines(run) == [
        f"quarantine collapsed: {len(urls)} held ({', '.join(urls[:3])}{more}), 0 taken, 0 released; "
        "`freshness release --kind collapsed` takes them"
    ], run["warnings"]
    assert p.triples() == before
    rows = p.pages()
    assert {u for u, r in rows.items() if r.quarantine is not None} == set(urls)
    assert all(rows[u].quarantine.kind is Kind.COLLAPSED and rows[u].error_count == 0 for u in urls)
    assert max(rows[u].quarantine.seen for u in urls) <= runs


def assert_recovered(p: Pipeline, back: dict[str, Any], before: set[Any]) -> None:
    assert (back["embedded"], back["deleted"], back["upserted"], back["errors"], back["flagged"]) == (0, 0, 0, 0, 0)
    assert quarantine_lines(back) == [] and p.triples() == before
    assert all(r.quarantine is None for r in p.pages().values())


@pytest.mark.parametrize("share", [0.15, 0.19, 0.40])
def test_a_per_url_maintenance_page_is_held_for_as_long_as_it_lasts(
    share: float, dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(PAGES, sections_per_page=2, seed=520)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server, **NO_SPIKE)
        p.run()
        before = p.triples()
        assert len(before) == 2 * PAGES
        hit = sorted(pages)[: round(share * PAGES)]
        for run in (1, 2, 3):  # one, two and three runs: repetition never confirms it
            server.pages = {**pages, **{path: maintenance(p.url(path), run) for path in hit}}
            assert_held(p, p.run(), hit, before, run)
            assert {p.url(path) for path in hit} <= {u for u, _ in p.status()["flagged"]}
            assert {r.quarantine.seen for r in p.pages().values() if r.quarantine} == {run}
        server.pages = pages
        assert_recovered(p, p.run(), before)


def test_ten_percent_more_pages_each_run_are_held(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(PAGES, sections_per_page=2, seed=521)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server, **NO_SPIKE)
        p.run()
        before = p.triples()
        paths = sorted(pages)
        for run in (1, 2, 3, 4):
            hit = paths[: run * PAGES // 10]
            server.pages = {**pages, **{path: maintenance(p.url(path), run) for path in hit}}
            assert_held(p, p.run(), hit, before, run)
        server.pages = pages
        assert_recovered(p, p.run(), before)


def test_a_release_takes_the_held_pages_as_they_now_read(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What was truly changed, one command takes: `freshness release --kind collapsed`."""
    site = generate(20, sections_per_page=2, seed=522)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server, **NO_SPIKE)
        p.run()
        hit = sorted(pages)[:4]
        server.pages = {**pages, **{path: maintenance(p.url(path), 1) for path in hit}}
        assert p.run()["embedded"] == 0
        code = main(["--sources", str(p.sources), "release", "--kind", "collapsed", "--json"])
        released = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert code == 0 and (released["embedded"], released["deleted"], released["errors"]) == (4, 8, 0), released
        urls = sorted(p.url(path) for path in hit)
        assert quarantine_lines(released) == [
            f"quarantine collapsed: 0 held, 0 taken, 4 released ({', '.join(urls[:3])} and 1 more)"
        ]
        assert {u for u, _, t in p.triples() if "Upgrade in progress" in t or "documentation platform" in t} == set(
            urls
        )
        assert all(r.quarantine is None for r in p.pages().values())
