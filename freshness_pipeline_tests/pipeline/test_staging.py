"""The staging between stages: a run's staged work is named by its run id, a later run's
start drops whatever a killed run staged (so none of it reaches the later plan), the
commit drops the run's own, and a stage whose staged input is gone refuses to go on."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.staging import StagingGone
from freshness_pipeline.config import load_settings
from freshness_pipeline.core.versions import namespace
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.crawl import crawl
from freshness_pipeline.pipeline.indexing import apply_plan
from freshness_pipeline.pipeline.maintenance import migrate
from freshness_pipeline.pipeline.planning import stage_plan
from freshness_pipeline.pipeline.sections import stage_sections
from freshness_pipeline_tests.sitegen import Site, generate, paragraph

STAGED = ("staged_runs", "staged_extracts", "staged_pages", "staged_sections", "staged_plan", "staged_events")


def staged_rows(ctx: SourceContext) -> dict[str, int]:
    with ctx.store.engine.connect() as conn:
        tables = {n: schema.metadata.tables[n] for n in STAGED}
        counts = {n: conn.execute(select(func.count()).select_from(t)).scalar_one() for n, t in tables.items()}
    return {n: c for n, c in counts.items() if c}


def refresh(ctx: SourceContext, run_id: str) -> dict:
    crawled = crawl(ctx, run_id=run_id)
    return apply_plan(ctx, stage_plan(ctx, stage_sections(ctx, crawled)), run_id=run_id).counts


@contextmanager
def opened(dagster_home: Path, site: DocsSite, **settings: object) -> Iterator[SourceContext]:
    """A migrated context for one source of `site` (hashing embedder), plus `settings`."""
    sources = dagster_home / "sources.yaml"
    sources.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "docs", "sitemap": site.sitemap_url}],
                "embedder": {"provider": "hashing"},
                **settings,
            }
        )
    )
    loaded = load_settings(sources)
    migrate(loaded)  # what a run's first stage does
    context = SourceContext.open(loaded, "docs")
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def ctx(dagster_home: Path):
    with DocsSite() as site, opened(dagster_home, site) as context:
        context.site = site  # type: ignore[attr-defined]
        yield context


def test_a_killed_runs_staging_never_reaches_a_later_plan(ctx: SourceContext) -> None:
    v0 = generate(4, sections_per_page=3, seed=5)
    ctx.site.publish(v0.markdown())  # type: ignore[attr-defined]
    first = refresh(ctx, "run-0")
    assert first["sections_new"] == 12 and staged_rows(ctx) == {}, "the commit drops its run's staging"

    # Run A sees an edit, stages the page's new sections and a plan, then dies.
    edited = Site(copy.deepcopy(v0.pages))
    heading, _ = edited.pages["guide/page1.md"][0]
    edited.pages["guide/page1.md"][0] = (heading, paragraph(random.Random(1)))
    ctx.site.publish(edited.markdown())  # type: ignore[attr-defined]
    crawled_a = crawl(ctx, run_id="run-A")
    planned_a = stage_plan(ctx, stage_sections(ctx, crawled_a))
    assert planned_a.counts["changed"] == 1
    assert staged_rows(ctx)["staged_sections"] == 3

    # The site reverts before run B: B's crawl drops A's staging, and B plans nothing.
    ctx.site.publish(v0.markdown())  # type: ignore[attr-defined]
    crawled_b = crawl(ctx, run_id="run-B")
    assert set(staged_rows(ctx)) == {"staged_runs"}, "run A's staging outlived run B's start"
    with pytest.raises(StagingGone, match="run-A"):  # A's plan, resumed now, commits nothing
        apply_plan(ctx, planned_a, run_id="run-A")
    with pytest.raises(StagingGone, match="freshness run --source docs"):  # nor do A's pages
        stage_sections(ctx, crawled_a)
    planned_b = stage_plan(ctx, stage_sections(ctx, crawled_b))
    assert (planned_b.written, planned_b.deletes) == (0, 0), planned_b
    counts = apply_plan(ctx, planned_b, run_id="run-B").counts
    assert counts["embedded"] == counts["upserted"] == 0
    state = ctx.store.sources.get("docs")
    texts = {r["text"] for r in ctx.vectors.records(namespace("docs", state.active_version))}
    assert texts == {s.text for s in ctx.store.manifest.sections("docs")}
    assert edited.pages["guide/page1.md"][0][1] not in " ".join(texts)
    assert staged_rows(ctx) == {}


def test_a_crawl_stages_and_saves_only_the_texts_that_changed(ctx: SourceContext, monkeypatch) -> None:
    """Bodies that differ only by their date and build stamp extract to the stored text: it
    is neither staged nor written again; the edited page is both, and its new text becomes
    the stored one only with the run's commit."""
    v0 = generate(5, sections_per_page=3, seed=7)
    ctx.site.publish(v0.markdown())  # type: ignore[attr-defined]
    refresh(ctx, "run-0")
    stored = ctx.store.pages.markdown("docs", list(ctx.store.pages.load("docs", with_markdown=False)))
    edited = Site(copy.deepcopy(v0.pages))
    heading, _ = edited.pages["guide/page2.md"][0]
    edited.pages["guide/page2.md"][0] = (heading, paragraph(random.Random(3)))
    ctx.site.etags = False  # type: ignore[attr-defined]
    stamp = {"updated": "December 1, 2026 10:00", "build": "b-2"}
    ctx.site.publish(edited.markdown(), noise=lambda path: stamp)  # type: ignore[attr-defined]
    staged, saved = [], []
    add_extracts, save = ctx.store.crawl_staging.add_extracts, ctx.store.crawl_staging.save_page_rows
    monkeypatch.setattr(
        ctx.store.crawl_staging, "add_extracts", lambda s, r, items: add_extracts(s, r, staged.extend(items) or staged)
    )

    def save_spy(source, run_id, rows):
        rows = list(rows)
        saved.extend(r.url for r in rows if r.markdown is not None)  # as saved: the crawl lets texts go after
        save(source, run_id, rows)

    monkeypatch.setattr(ctx.store.crawl_staging, "save_page_rows", save_spy)
    report = crawl(ctx, run_id="run-1")
    (page2,) = [u for u in stored if u.endswith("/guide/page2")]
    assert report.crawled == 5 and report.changed_pages == 1 and report.outcomes == {"ok": 5}
    assert [u for u, *_ in staged] == [page2]
    assert saved == [page2]
    after = ctx.store.pages.markdown("docs", list(stored), run_id="run-1")  # as the run's own stages read it
    assert {u: t for u, t in after.items() if u != page2} == {u: t for u, t in stored.items() if u != page2}
    assert after[page2] != stored[page2]
    assert ctx.store.pages.markdown("docs", list(stored)) == stored  # not committed yet
    counts = apply_plan(ctx, stage_plan(ctx, stage_sections(ctx, report)), run_id="run-1").counts
    assert counts["embedded"] == 1 and counts["deleted"] == 0
    assert ctx.store.pages.markdown("docs", list(stored)) == after


def test_upserts_are_batched_across_the_staged_batches(dagster_home: Path, monkeypatch) -> None:
    """The index stage reads the plan 1,000 rows at a time, but calls the vector store with
    `upsert_batch` records each (a LanceDB merge costs the table's size per call)."""
    with (
        DocsSite() as site,
        opened(dagster_home, site, vector_store={"provider": "lancedb", "upsert_batch": 700}) as ctx,
    ):
        site.publish(generate(100, sections_per_page=12, seed=2).markdown())
        calls: list[int] = []
        upsert = ctx.vectors.upsert
        monkeypatch.setattr(ctx.vectors, "upsert", lambda ns, recs: (calls.append(len(recs)), upsert(ns, recs)))
        counts = refresh(ctx, "run-0")
        assert counts["upserted"] == sum(calls) == 1200 and calls == [700, 500], calls
