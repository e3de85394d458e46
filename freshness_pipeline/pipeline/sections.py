"""Stage 2, `section_manifest`: the current sections of every page that may have changed.

A page is re-segmented only when its signature (normalized text, title, rules, chunker)
differs from the one its indexed sections were made from; every other page is carried as
it is, which is what keeps a quiet run cheap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..core.models import Section
from ..core.versions import page_signature, template_hash
from .context import SourceContext
from .crawl import CrawlReport
from .workers import SegmentJob, parallel_map, segment_one


@dataclass(slots=True)
class SectionSet:
    source: str
    sections: list[Section] = field(default_factory=list)  # of the dirty pages only
    signatures: dict[str, str | None] = field(default_factory=dict)  # dirty/gone url -> new sig
    moves: dict[str, str] = field(default_factory=dict)  # old url -> url it moved to
    gone: list[str] = field(default_factory=list)  # urls whose sections must go
    live_pages: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # url -> reason
    reindex_reason: str | None = None
    crawl: CrawlReport | None = None  # the fetch that produced these pages
    seconds: float = 0.0


def current_sections(ctx: SourceContext, crawl: CrawlReport | None = None) -> SectionSet:
    started = time.time()
    src, store = ctx.source, ctx.store
    state = store.sources.get(src.name)
    out = SectionSet(source=src.name, crawl=crawl)
    if state is None:
        out.seconds = time.time() - started
        return out  # nothing crawled yet
    diffs = ctx.versions.differences(state)
    if diffs and state.generation > 0:
        out.reindex_reason = "version change: " + "; ".join(diffs)
    elif state.generation > 0 and (asked := store.metrics.pending_reindex(src.name)):
        out.reindex_reason = asked["reason"]  # e.g. repeated golden-set misses (pipeline/golden.py)
    blocks = frozenset(state.template_blocks)
    thash = template_hash(state.template_blocks)
    dirty: dict[str, str] = {}
    pages = store.pages.load(src.name, with_markdown=False)
    for page in pages.values():
        if page.state != "live":
            if page.indexed_signature is not None:  # its sections are still indexed
                out.gone.append(page.url)
                out.signatures[page.url] = None
                if page.state == "moved" and page.moved_to:
                    out.moves[page.url] = page.moved_to
            continue
        if page.text_hash is None:
            continue  # never had content (skipped, or only errors so far)
        out.live_pages += 1
        sig = page_signature(page.text_hash, page.title, thash, ctx.versions)
        if out.reindex_reason or sig != page.indexed_signature:
            dirty[page.url] = sig
    # A page that moved onto a live page: the planner compares against that page's
    # indexed sections too, so it must have current ones even when its text is unchanged.
    for url in set(out.moves.values()) - dirty.keys():
        page = pages.get(url)
        if page is not None and page.state == "live" and page.text_hash is not None:
            dirty[url] = page_signature(page.text_hash, page.title, thash, ctx.versions)
    markdown = store.pages.markdown(src.name, dirty)
    jobs = [
        SegmentJob(url, markdown.get(url, ""), pages[url].page_date, pages[url].title, blocks, ctx.tokenizer)
        for url in sorted(dirty)
    ]
    for url, result in parallel_map(segment_one, jobs):
        if isinstance(result, str):
            out.errors[url] = result  # keep the old sections: the page stays out of the plan
            continue
        out.sections.extend(result)
        out.signatures[url] = dirty[url]
    out.seconds = time.time() - started
    return out
