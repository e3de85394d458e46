"""Stage 2, `section_manifest`: the current sections of every page that may have changed.

A page is re-segmented only when its signature (normalized text, title, template blocks,
rules, chunker) differs from the one its indexed sections were made from; every other page
is carried as it is, which is what keeps a quiet run cheap. A page whose text this run's
crawl did not fetch (kept on an error or a hold, a 304, a page a tier run left out) is
carried as it is whatever changed: its text holds the chrome of the build it was fetched
from, which the blocks learned from this run's pages no longer strip. On a re-index (a new
index version holds only what this run stages) its kept text is segmented again, without
the template blocks it had when its sections were last cut (`PageRow.cut_blocks`) as well
as this run's. It reads the pages as the crawl it is handed staged them, and stages what
it decides in the same run's staging (`staged_pages`, `staged_sections`), batch by batch
as the pool segments.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import islice

from ..adapters.embedders.tokenizer import capped_budget
from ..adapters.state.staging import SectionStaging, Stage, StagedPage
from ..core.models import Outcome, Section
from ..core.state import PageRow
from ..core.versions import page_signature, template_hash
from .context import SourceContext
from .crawl import CrawlReport
from .workers import SegmentJob, parallel_map, segment_one

STAGE_BATCH = 200  # pages whose sections are staged at a time


@dataclass(slots=True)
class SectionsReport:
    """What stage 2 staged for `run_id`, in counts, with the crawl's that the index stage's
    run line takes (`crawl_counts`, `crawl_seconds`)."""

    source: str
    run_id: str
    crawl_counts: dict[str, int] = field(default_factory=dict)
    crawl_seconds: float = 0.0
    live_pages: int = 0
    resegmented_pages: int = 0
    sections: int = 0  # of the re-segmented pages
    gone_pages: int = 0  # pages whose sections must go
    errors: dict[str, str] = field(default_factory=dict)  # page -> why it could not be segmented (its sections stay)
    reindex_reason: str | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # settings that change nothing, ...


def stage_sections(ctx: SourceContext, crawl: CrawlReport) -> SectionsReport:
    """Stage the sections of the pages `crawl` staged (in its run's staging); raises
    `StagingGone` when that staging is gone."""
    started = time.time()
    src, store, run_id = ctx.source, ctx.store, crawl.run_id
    out = SectionsReport(src.name, run_id, crawl.page_counts(), crawl.seconds)
    if capped := capped_budget(ctx.settings.embedder, src.chunking):
        out.warnings.append(capped)
    staging = store.section_staging
    with store.locks.lock(src.name):
        store.staged_runs.require(src.name, run_id, Stage.CRAWL)
        store.staged_runs.restart(src.name, run_id, Stage.SECTIONS)
        state = store.sources.get(src.name)
        if state is not None:
            diffs = ctx.versions.differences(state)
            if diffs and state.generation > 0:
                out.reindex_reason = "version change: " + "; ".join(diffs)
            elif state.generation > 0 and (asked := store.metrics.pending_reindex(src.name)):
                out.reindex_reason = asked["reason"]  # e.g. repeated golden-set misses (pipeline/golden.py)
            learned = store.crawl_staging.template_blocks(src.name, run_id)  # this run's crawl's, until it commits
            _stage(ctx, staging, out, state.template_blocks if learned is None else learned, crawl.fetched_at)
        out.seconds = time.time() - started
        store.staged_runs.finish(src.name, run_id, Stage.SECTIONS)
    return out


def _stage(
    ctx: SourceContext, staging: SectionStaging, out: SectionsReport, template_blocks: list[str], fetched_at: float
) -> None:
    """Stage the gone pages, then segment the dirty ones and stage their sections."""
    src = ctx.source
    thash = template_hash(template_blocks)
    pages = ctx.store.pages.load(src.name, with_markdown=False, run_id=out.run_id)  # as this run's crawl saw them
    fresh = {u for u, p in pages.items() if p.outcome == Outcome.OK.value and p.last_fetched == fetched_at}
    dirty, gone = _dirty(ctx, pages, fresh, thash, out)
    staging.add_pages(src.name, out.run_id, gone)
    out.gone_pages = len(gone)
    blocks = frozenset(template_blocks)
    texts = ctx.store.pages.iter_markdown(src.name, sorted(dirty), run_id=out.run_id)  # by chunks, not all at once
    jobs = (
        SegmentJob(
            url,
            md,
            pages[url].page_date,
            pages[url].title,
            _blocks(pages[url], fresh, blocks),
            ctx.tokenizer,
            src.fetch.page_deadline_s,
        )
        for url, md in texts
    )
    results = parallel_map(segment_one, jobs)
    while part := list(islice(results, STAGE_BATCH)):
        sections: list[Section] = []
        decided: list[StagedPage] = []
        for url, result in part:
            if isinstance(result, str):
                decided.append(StagedPage(url, error=result))  # keeps its old sections: out of the plan
                out.errors[url] = result
                continue
            sections.extend(result.sections)
            decided.append(StagedPage(url, signature=dirty[url], cut_blocks=tuple(sorted(result.blocks))))
            out.resegmented_pages += 1
        staging.add_sections(src.name, out.run_id, sections)
        staging.add_pages(src.name, out.run_id, decided)
        out.sections += len(sections)


def _blocks(page: PageRow, fresh: set[str], blocks: frozenset[str]) -> frozenset[str]:
    """The template blocks a page's text is cut without. A kept text's own as well: the
    chrome of the build it came from repeated across that build's pages, so it was learned
    then and stripped from its sections, where this run's pages may no longer teach it."""
    return blocks if page.url in fresh or not page.cut_blocks else blocks | frozenset(page.cut_blocks)


def _dirty(
    ctx: SourceContext, pages: dict[str, PageRow], fresh: set[str], thash: str, out: SectionsReport
) -> tuple[dict[str, str], list[StagedPage]]:
    """(url -> new signature of every page to re-segment, the pages whose sections go)."""
    dirty: dict[str, str] = {}
    gone: list[StagedPage] = []
    moved_to: set[str] = set()
    for page in pages.values():
        if page.state != "live":
            if page.indexed_signature is not None:  # its sections are still indexed
                moved = page.moved_to if page.state == "moved" else None
                gone.append(StagedPage(page.url, moved_to=moved))
                if moved:
                    moved_to.add(moved)
            continue
        if page.text_hash is None:
            continue  # never had content (skipped, or only errors so far)
        out.live_pages += 1
        if page.url not in fresh and page.indexed_signature is not None and not out.reindex_reason:
            continue  # its text was kept (an error, a hold, a 304, not in this tier): so are its sections
        sig = page_signature(page.text_hash, page.title, thash, ctx.versions)
        if out.reindex_reason or sig != page.indexed_signature:
            dirty[page.url] = sig
    # A page that moved onto a live page: the planner compares against that page's
    # indexed sections too, so it must have current ones even when its text is unchanged.
    for url in moved_to - dirty.keys():
        target = pages.get(url)
        if target is not None and target.state == "live" and target.text_hash is not None:
            dirty[url] = page_signature(target.text_hash, target.title, thash, ctx.versions)
    return dirty, gone
