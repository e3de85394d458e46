"""Golden sets: per source, queries with the page or section that should answer them, run
with the search a user gets (`search.ranked`, hybrid) against an index namespace (the
active one after every run, or a re-indexed one before it becomes active). Misses are
counted across runs; a query or section that misses on `checks.golden_miss_runs`
consecutive runs requests a full re-index of its source.

The file (`golden_set:` of the source, relative to the sources file):

    - query: how many times is an upload retried after a network error?
      expect: /configuration/          # page URL or path, or a 40-hex section key
      stale_prone: true                # its answer changed at least once
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..adapters.vectorstores.base import Hit
from ..config import ConfigError, Source, sources_path
from ..core.freshness import GoldenCase, GoldenScore, score_golden
from ..core.state import PageRow
from ..core.urls import normalize_url
from ..core.versions import namespace, page_signature, template_hash
from .context import SourceContext
from .search import ranked
from .workers import SegmentJob, segment_one

DEPTH = 10  # results read per query (MRR looks this far)
TOP = 5  # hit@5, misses and stale retrieval look at this many
_KEY = re.compile(r"[0-9a-f]{40}")


@dataclass(slots=True)
class GoldenRun:
    source: str
    namespace: str
    score: GoldenScore
    cases: list[GoldenCase] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)
    stale_queries: list[str] = field(default_factory=list)  # top results held stale text
    top_urls: list[list[str]] = field(default_factory=list)

    @property
    def stale_retrieval_rate(self) -> float | None:
        return len(self.stale_queries) / len(self.cases) if self.cases else None

    def rows(self) -> list[dict[str, Any]]:
        """One row per query, for tables."""
        return [
            {
                "query": c.query,
                "expect": c.expect,
                "stale_prone": c.stale_prone,
                "rank": r,
                "stale": c.query in self.stale_queries,
                "top": urls[0] if urls else None,
            }
            for c, r, urls in zip(self.cases, self.ranks, self.top_urls, strict=True)
        ]


def golden_file(source: Source) -> Path | None:
    if not source.golden_set:
        return None
    path = Path(source.golden_set)
    return path if path.is_absolute() else sources_path().resolve().parent / path


def load_golden(path: Path) -> list[GoldenCase]:
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: golden set not found") from None
    items = raw.get("queries", []) if isinstance(raw, dict) else raw or []
    try:
        return [GoldenCase(str(i["query"]), str(i["expect"]), bool(i.get("stale_prone", False))) for i in items]
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: every entry needs `query` and `expect` ({exc!r})") from exc


def evaluate(
    ctx: SourceContext,
    cases: list[GoldenCase],
    *,
    ns: str | None = None,
    current: Callable[[Collection[str]], dict[str, str]] | None = None,
    run_id: str | None = None,
) -> GoldenRun:
    """Run the golden set against `ns` (default: the active index version). Reads only:
    safe to call on a re-indexed namespace before the commit makes it active. `current`
    gives the current sections' content hashes of some pages (a run's staged sections);
    without it a page changed since it was indexed is segmented again to tell. The live
    pages are the committed ones, or with `run_id` what that run's crawl saw over them."""
    state = ctx.store.sources.get(ctx.name)
    active = namespace(ctx.name, state.active_version if state else 1)
    ns = ns or active
    run = GoldenRun(ctx.name, ns, GoldenScore(), list(cases))
    if not cases:
        return run
    vectors = ctx.embedder.embed([c.query for c in cases])
    # The search a user gets (hybrid), so a miss counted here is one a user would see.
    results = [
        [f.hit for f in ranked(ctx.vectors, ns, c.query, v.tolist(), DEPTH)]
        for c, v in zip(cases, vectors, strict=True)
    ]
    top = [h for hits in results for h in hits[:TOP]]
    stale = stale_ids(ctx, top, manifest_is_index=ns == active, current=current, run_id=run_id)
    for case, hits in zip(cases, results, strict=True):
        match = _matcher(ctx, case.expect)
        run.ranks.append(next((i for i, h in enumerate(hits, 1) if match(h)), None))
        run.top_urls.append([h.metadata["url"] for h in hits[:TOP]])
        if any(h.id in stale for h in hits[:TOP]):
            run.stale_queries.append(case.query)
    run.score = score_golden(cases, run.ranks, cutoff=TOP)
    return run


def stale_ids(
    ctx: SourceContext,
    hits: list[Hit],
    *,
    manifest_is_index: bool = True,
    current: Callable[[Collection[str]], dict[str, str]] | None = None,
    run_id: str | None = None,
) -> set[str]:
    """Records whose stored text is not what the live page has now: the page is gone, or
    its current section under that id has another content hash. When the hits come from
    the active index (`manifest_is_index`), a page whose signature is the one its sections
    were indexed from is current (fuzzy-unchanged edits included) without re-segmenting;
    `current` gives the current sections of the others (else they are segmented again)."""
    state = ctx.store.sources.get(ctx.name)
    blocks = list(state.template_blocks) if state else []
    pages = ctx.store.pages.load(ctx.name, with_markdown=False, run_id=run_id)
    by_url: dict[str, list[Hit]] = {}
    for h in hits:
        by_url.setdefault(h.metadata["url"], []).append(h)
    stale: set[str] = set()
    todo: list[str] = []
    for url, page_hits in by_url.items():
        page = pages.get(url)
        if page is None or page.state != "live":
            stale.update(h.id for h in page_hits)
            continue
        sig = page_signature(page.text_hash, page.title, template_hash(blocks), ctx.versions)
        if not (manifest_is_index and sig == page.indexed_signature):
            todo.append(url)
    live = current(todo) if current is not None else _segmented(ctx, todo, pages, blocks, run_id)
    for url in todo:
        stale.update(h.id for h in by_url[url] if live.get(h.id) != h.metadata.get("content_hash"))
    return stale


def _segmented(
    ctx: SourceContext, urls: list[str], pages: dict[str, PageRow], blocks: list[str], run_id: str | None
) -> dict[str, str]:
    """Record id -> content hash of these pages' sections, segmented again."""
    out: dict[str, str] = {}
    for url in urls:
        page = pages[url]
        md = ctx.store.pages.markdown(ctx.name, [url], run_id=run_id).get(url, "")
        _, sections = segment_one(SegmentJob(url, md, page.page_date, page.title, frozenset(blocks), ctx.tokenizer))
        if not isinstance(sections, str):
            out.update((s.id, s.content_hash) for s in sections.sections)
    return out


def record_misses(ctx: SourceContext, run: GoldenRun) -> str | None:
    """Count this run's misses per query and per expected section; returns the reason of
    the re-index requested when a counter just reached the limit."""
    metrics = ctx.store.metrics
    limit = ctx.source.checks.golden_miss_runs
    missed = {c.query: (r is None or r > TOP) for c, r in zip(run.cases, run.ranks, strict=True)}
    targets: dict[str, bool] = {}
    for c in run.cases:  # a section misses when none of its queries found it
        targets[c.expect] = targets.get(c.expect, True) and missed[c.query]
    streaks = {
        **{("query", s): n for s, n in metrics.count_misses(ctx.name, "query", missed).items()},
        **{("section", s): n for s, n in metrics.count_misses(ctx.name, "section", targets).items()},
    }
    reached = sorted(f"{kind} {subject!r}" for (kind, subject), n in streaks.items() if n == limit)
    if not reached:
        return None
    state = ctx.store.sources.get(ctx.name)
    reason = f"golden set: {', '.join(reached)} missed {limit} consecutive runs (probable chunking problem)"
    metrics.request_reindex(ctx.name, reason, state.active_version if state else 1)
    return reason


def _matcher(ctx: SourceContext, expect: str):
    if _KEY.fullmatch(expect):
        key, _ = ctx.store.manifest.resolve_key(ctx.name, expect)
        return lambda h: h.metadata.get("key") == key
    src = ctx.source
    base = src.sitemap or (src.start_urls[0] if src.start_urls else None)
    url = normalize_url(expect, base=base, keep_params=src.fetch.keep_query_params, drop_query=src.fetch.drop_query)
    return lambda h: h.metadata.get("url") == url
