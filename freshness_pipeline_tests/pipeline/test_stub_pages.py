"""A page cut to a stub, through `freshness run` on a loopback site whose every build rotates
a "tip of the day": held at first sight (nothing written or deleted, flagged), taken when
the next run sees the same stub (its old sections deleted, the stub's written, the run says
so), and an error page held on every run for as long as it lasts, through a re-index."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_pipeline.demo.render import render
from freshness_pipeline_tests.pipeline.test_fetch_policy import Pipeline, html_pages
from freshness_pipeline_tests.sitefixture import Page, SiteServer
from freshness_pipeline_tests.sitegen import generate

STUB = "Obsolete, see the new context guide instead."
TIPS = ("press the slash key to search.", "every page has an edit link.", "dark mode follows your system.")


def publish(server: SiteServer, pages: dict[str, Page], build: int) -> None:
    """Serve `pages` as one build: its tip of the day on top of every page's article."""
    tip = f"<main><article><p>Tip of the day: {TIPS[build % len(TIPS)]}</p>"
    server.pages.clear()
    server.pages.update({path: Page(str(p.html).replace("<main><article>", tip, 1)) for path, p in pages.items()})


def test_a_stub_is_held_once_then_taken_and_an_error_page_is_held_on_every_run(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(12, sections_per_page=3, seed=43)
    pages = html_pages(site)
    with SiteServer({}) as server:
        publish(server, pages, 0)
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        before = p.triples()
        stub_url, wall_url = p.url("/guide/page3"), p.url("/guide/page7")
        assert {t for t in before if t[0] == stub_url} and "Tip of the day" not in str(before)

        pages["/guide/page3"] = Page(render(f"# Context\n\n{STUB}", title="Context", nav={"/": "Home"}))
        pages["/guide/page7"] = Page(render("# Page not found\n\nSorry.", title="Page not found", nav={"/": "Home"}))
        publish(server, pages, 1)
        held = p.run()
        assert (held["upserted"], held["deleted"], held["embedded"]) == (0, 0, 0), held
        assert held["flagged_pages"][stub_url].startswith("turned near-empty")
        assert "404" in held["flagged_pages"][wall_url]
        assert p.triples() == before  # no record of the stub, none of the old ones deleted

        publish(server, pages, 2)  # the same stub under the next build's tip: confirmed
        taken = p.run()
        assert (taken["upserted"], taken["deleted"]) == (1, 3), taken
        lines = [w for w in taken["warnings"] if w.startswith("quarantine ")]
        assert lines == [
            f"quarantine soft_404: 1 held ({wall_url}), 0 taken, 0 released",
            f"quarantine near_empty: 0 held, 1 taken ({stub_url}), 0 released",
        ], lines
        assert set(taken["flagged_pages"]) == {wall_url}  # the error page is still held
        stub_records = {t for t in p.triples() if t[0] == stub_url}
        assert {text for _, _, text in stub_records} == {STUB}, stub_records
        assert p.triples() - stub_records == {t for t in before if t[0] != stub_url}

        publish(server, pages, 3)
        again = p.run()
        assert (again["upserted"], again["deleted"], again["embedded"]) == (0, 0, 0), again
        assert set(again["flagged_pages"]) == {wall_url}
        assert {t for t in p.triples() if t[0] == wall_url} == {t for t in before if t[0] == wall_url}

        # A re-index builds a new index version from what the run stages: the held page's
        # last good text goes into it too.
        p.configure(chunking={"token_budget": 500})
        reindexed = p.run()
        assert reindexed["reindex_reason"] and set(reindexed["flagged_pages"]) == {wall_url}, reindexed
        assert {t for t in before if t[0] == wall_url} <= p.triples()
