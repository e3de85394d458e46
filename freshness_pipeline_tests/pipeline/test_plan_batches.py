"""Planning a batch of pages at a time makes the plan one call over every page makes: the
pages the planner pairs (a moved page and its target, a section whose text went to
another page) land in the same batch, even when every batch holds a single group."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from freshness_pipeline.adapters.state.staging import Stage, StagedPage
from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.config import load_settings
from freshness_pipeline.core.models import Action, Plan
from freshness_pipeline.core.plan import plan_pages
from freshness_pipeline.core.segment import segment
from freshness_pipeline.core.state import SourceState
from freshness_pipeline.pipeline import planning
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.sections import SectionsReport

BASE = "http://docs.test"
ACTIONS = tuple(Action)
A = "Alpha text that explains the first example of the client in a few plain words."
B = "Beta text that explains the second example of the client in other plain words."
C = "Gamma text that explains the third example of the client in more plain words."
D = "Delta text that explains the fourth example of the client in still other words."

BEFORE = {
    "/a": f"# P\n\n## One\n\n{A}\n",
    "/c": f"# P\n\n## Two\n\n{B}\n\n## Three\n\n{C}\n",
    "/e": f"# Q\n\n## Example\n\n{D}\n",
    "/f": f"# R\n\n## Kept\n\n{C}\n",
}
AFTER = {
    "/b": f"# P\n\n## One\n\n{A}\n",  # /a moved here (a 301)
    "/c": f"# P\n\n## Three\n\n{C}\n",  # lost "Two" ...
    "/d": f"# P\n\n## Two\n\n{B}\n",  # ... which a new page now holds
    "/e": f"# Q\n\n## Example usage\n\n{D} More.\n",  # a renamed heading, its text edited
    "/f": f"# R\n\n## Kept\n\n{C}\n",
}


def sections(pages: dict[str, str]) -> list:
    return [s for path, md in pages.items() for s in segment(BASE + path, md)]


def test_batched_planning_equals_one_plan_over_every_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [{"name": "docs", "sitemap": f"{BASE}/sitemap.xml"}]}))
    settings = load_settings(path)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    migrate(url)
    store = StateStore(url)
    ctx = SourceContext(settings, settings.source("docs"), store)
    previous, current = sections(BEFORE), sections(AFTER)
    run = {"run_id": "r0", "started_at": 0.0, "finished_at": 1.0, "counts": {}}
    state = SourceState("docs", "n", "c", "m", 8)
    store.manifest.commit(
        state, [Plan("docs", new=previous)], base_generation=0, replace_all=False, signatures={}, events=[], run=run
    )
    store.staged_runs.begin("docs", "r1", Stage.CRAWL)
    pages = [StagedPage(BASE + "/a", moved_to=BASE + "/b"), *(StagedPage(BASE + p, signature="s") for p in AFTER)]
    store.section_staging.add_pages("docs", "r1", pages)
    store.section_staging.add_sections("docs", "r1", current)
    store.staged_runs.finish("docs", "r1", Stage.SECTIONS)
    monkeypatch.setattr(planning, "PLAN_BATCH", 1)

    report = planning.stage_plan(ctx, SectionsReport("docs", "r1"))

    whole = plan_pages("docs", previous, current, page_moves={BASE + "/a": BASE + "/b"}, seen_month="2026-01")
    assert whole.moved and whole.key_redirects and whole.changed  # the case pairs across pages
    plan_staging = store.plan_staging
    staged = {(r.id, r.action, r.old_id) for batch in plan_staging.rows("docs", "r1", ACTIONS) for r, _ in batch}
    want = {(r.id, r.action, r.old_id) for r in planning._rows(whole, previous, current)}
    assert staged == want
    assert plan_staging.redirects("docs", "r1") == sorted(whole.key_redirects)
    assert (report.counts["moved"], report.counts["new"]) == (len(whole.moved), len(whole.new))
    store.close()
