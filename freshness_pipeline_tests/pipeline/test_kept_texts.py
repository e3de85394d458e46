"""A page whose text was not fetched this run (a 503, a 304, a page a tier run left out),
through `freshness run` on a loopback site whose every build rotates a "tip of the day":
after a rebuild the old build's tip is no longer a repeated block, yet the page's records
stay exactly as they were (nothing embedded, no orphan tip record), and a re-index cuts its
kept text again without the old tip."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_pipeline_tests.pipeline.test_fetch_policy import Pipeline, html_pages
from freshness_pipeline_tests.pipeline.test_stub_pages import publish
from freshness_pipeline_tests.sitefixture import Page, SiteServer
from freshness_pipeline_tests.sitegen import generate

KEPT = "/guide/page3"


def keep_old_text(server: SiteServer, p: Pipeline, kind: str, old_build: dict[str, Page]) -> str | None:
    """Make `KEPT` answer this run without new text; returns the tier to run, if any."""
    if kind == "error":
        server.faults[KEPT] = [503] * 10
    elif kind == "not_modified":
        server.pages[KEPT] = old_build[KEPT]  # its old bytes: a 304
    return "warm" if kind == "tier" else None


@pytest.mark.parametrize("kind", ["error", "not_modified", "tier"])
def test_a_page_not_fetched_after_a_rebuild_keeps_its_records_until_a_reindex_cuts_it_without_old_chrome(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    pages = html_pages(generate(12, sections_per_page=3, seed=43))
    with SiteServer({}) as server:
        publish(server, pages, 0)
        build0 = dict(server.pages)
        p = Pipeline(tmp_path, capsys, server, tiers={"rules": [{"pattern": KEPT + "$", "tier": "cold"}]})
        p.run()
        before = p.triples()
        kept = p.url(KEPT)
        assert {t for t in before if t[0] == kept} and "Tip of the day" not in str(before)

        publish(server, pages, 1)  # a rebuild: a new tip on every page
        server.requests.clear()
        tier = keep_old_text(server, p, kind, build0)
        quiet = p.run(tier=tier)
        fetched = {path for _, path, _ in server.requests}
        assert (KEPT in fetched) == (kind != "tier"), fetched
        assert (quiet["upserted"], quiet["deleted"], quiet["embedded"]) == (0, 0, 0), quiet
        assert p.triples() == before  # no orphan tip record, no section's text changed

        publish(server, pages, 2)  # the next build, the page still not fetched: a re-index
        tier = keep_old_text(server, p, kind, build0)
        p.configure(chunking={"token_budget": 500}, tiers={"rules": [{"pattern": KEPT + "$", "tier": "cold"}]})
        reindexed = p.run(tier=tier)
        assert reindexed["reindex_reason"], reindexed
        assert p.triples() == before, p.triples() ^ before  # its kept text cut again, no old tip in it
