"""An outage that answers 200 loses nothing, and nothing a blocked run saw outlives it:
through `freshness run` on a loopback site, a maintenance page served with 200 for every
page (unknown URLs still 404, so the not-found probe does not catch it) is held by the
quarantine (collapsed: no error) on the first run after the build and after quiet runs; a
run the change-spike check blocked leaves no text, validator or template behind, so a
later run's 503s plan nothing and the operator's override still indexes the site as it
is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from freshness_pipeline.cli import main
from freshness_pipeline_tests.pipeline.test_fetch_policy import Pipeline, html_pages
from freshness_pipeline_tests.sitefixture import Page, SiteServer
from freshness_pipeline_tests.sitegen import generate

# Long and plain: no title, heading or length rule reads it as an error page.
MAINTENANCE = Page(
    "<html><head><title>Docs</title></head><body><main><h1>Scheduled upgrade</h1>"
    + "".join(
        f"<p>Step {i}: our documentation platform is being upgraded to a new release with faster "
        "search, better navigation and refreshed examples for every supported language.</p>"
        for i in range(12)
    )
    + "</main></body></html>"
)


@pytest.mark.parametrize("quiet_runs", [0, 2], ids=["first-run-after-the-build", "after-quiet-runs"])
def test_a_maintenance_page_served_with_200_everywhere_is_held(
    quiet_runs: int, dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = generate(12, sections_per_page=2, seed=131)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        for _ in range(quiet_runs):
            assert p.run()["embedded"] == 0
        before = p.triples()
        assert before == site.expected(server.base_url)

        server.pages = {path: MAINTENANCE for path in pages}  # every page, same text, HTTP 200
        held = p.run()
        assert (held["embedded"], held["deleted"], held["gone"], held["errors"]) == (0, 0, 0, 0), held
        assert held["flagged"] == 12 and all(w.startswith("held: its new text") for w in held["flagged_pages"].values())
        assert p.triples() == before

        server.pages = pages  # maintenance over: nothing to repair, no template learned from it
        back = p.run()
        assert (back["embedded"], back["deleted"], back["errors"], back["upserted"]) == (0, 0, 0, 0), back
        assert p.triples() == before


def test_a_blocked_runs_texts_never_reach_a_later_run(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site, rewritten = generate(20, sections_per_page=3, seed=132), generate(20, sections_per_page=3, seed=133)
    pages = html_pages(site)
    with SiteServer(pages) as server:
        p = Pipeline(
            tmp_path, capsys, server, fetch={"quarantine": {"rewritten": {"confirm": 0}}}
        )  # the spike check alone
        p.run()
        for _ in range(2):
            assert p.run()["embedded"] == 0  # quiet runs: the spike check's history
        before = p.triples()

        server.pages = html_pages(rewritten)  # every page rewritten at once: a change spike
        blocked = p.run(ok=False)
        assert blocked["status"] == "blocked" and blocked["message"].startswith("change_spike: "), blocked
        assert p.triples() == before

        # The site is back, but 4 of its 20 pages answer 503: they keep their committed text,
        # not the text the blocked run saw (planned from it, their 12 records were deleted).
        server.pages = pages
        g = "/guide/page"
        for i in range(4):
            server.faults[f"{g}{i}"] = [503] * 10
        after = p.run()
        assert (after["embedded"], after["deleted"], after["errors"]) == (0, 0, 4), after
        assert p.triples() == before
        server.faults.clear()

        # The rewrite was real: the override indexes it, though its pages' validators were
        # seen by the blocked run (kept, they would have made every answer a 304).
        server.pages = html_pages(rewritten)
        p.run(ok=False)  # blocked again
        code = main(["--sources", str(p.sources), "run", "--json", "--allow-spike"])
        forced = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert code == 0 and forced["status"] == "success", forced
        assert forced["embedded"] == 60
        assert p.triples() == rewritten.expected(server.base_url)
