"""Stage 1, `fetched_pages`: crawl a source and record what each page now says.

This is the one place where a page is declared gone (404/410, or missing from the crawl
and unanswered for `missing_after` consecutive runs). Errors, soft 404s and skipped pages
keep their last good text, so nothing downstream deletes on a bad minute.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field, replace

from ..adapters.fetch import Fetcher, Target
from ..adapters.state.store import PageRow, SourceState
from ..core.models import FetchResult, Outcome
from ..core.noise import learn_template_blocks
from ..core.status import looks_soft_404
from ..core.tiers import tier_for
from ..core.urls import normalize_url
from .context import SourceContext
from .workers import Extracted, ExtractJob, extract_one, parallel_map

REPEATED_ERRORS_FLAG = 3  # consecutive errors before a page is flagged for review
KEEP_CHANGE_TIMES = 16


@dataclass(slots=True)
class CrawlReport:
    source: str
    crawled: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    changed_pages: int = 0  # pages whose normalized text differs from last time
    new_pages: int = 0
    gone: list[str] = field(default_factory=list)
    moves: dict[str, str] = field(default_factory=dict)  # old url -> final url
    errors: dict[str, str] = field(default_factory=dict)  # url -> reason
    flagged: dict[str, str] = field(default_factory=dict)  # url -> reason
    skipped: dict[str, str] = field(default_factory=dict)  # url -> reason
    tier: str | None = None
    seconds: float = 0.0


def crawl(ctx: SourceContext, *, tier: str | None = None) -> CrawlReport:
    started = time.time()
    src, store = ctx.source, ctx.store
    report = CrawlReport(source=src.name, tier=tier)
    with store.lock(src.name):
        known = store.load_pages(src.name, with_markdown=False)
        with Fetcher(src) as fetcher:
            discovery = fetcher.discover()
            targets, discovered = _targets(ctx, known, discovery.urls, tier)
            results = list(fetcher.fetch(targets))
        now = time.time()
        extracted = _extract([r for r in results if r.outcome is Outcome.OK], src.noise.disabled_rules)
        rows: dict[str, PageRow] = {}
        fetch_urls = {t.url: t.fetch_url for t in targets}
        for res in results:
            _apply(ctx, report, known, rows, res, extracted.get(res.url), res.url in discovered, fetch_urls, now)
        for row in rows.values():
            row.tier = tier_for(
                row.url, src.tiers, change_times=row.change_times, first_seen=row.first_seen, now=now
            )
        store.save_pages(rows.values())
        _learn_templates(ctx, changed=report.changed_pages + report.new_pages > 0)
    report.crawled = len(results)
    report.outcomes = dict(Counter(r.outcome.value for r in results))
    report.seconds = time.time() - started
    return report


def _targets(
    ctx: SourceContext, known: dict[str, PageRow], raw_urls: list[str], tier: str | None
) -> tuple[list[Target], set[str]]:
    """What to fetch this run, and which of those URLs the discovery found."""
    fp = ctx.source.fetch
    targets: dict[str, Target] = {}
    discovered: set[str] = set()
    for raw in raw_urls:
        url = normalize_url(raw, keep_params=fp.keep_query_params, drop_query=fp.drop_query)
        discovered.add(url)
        prev = known.get(url)
        if prev and prev.state == "moved" and prev.moved_to:
            continue  # the redirect target is crawled under its own URL
        if url not in targets:
            targets[url] = _target(url, raw, prev)
    # Known live pages missing from this crawl are re-checked directly.
    for row in known.values():
        if row.state == "live" and row.url not in targets:
            targets[row.url] = _target(row.url, row.fetch_url, row)
    chosen = [
        t for t in targets.values()
        if tier is None or (known[t.url].tier if t.url in known else tier) == tier
    ]
    return chosen, discovered


def _target(url: str, fetch_url: str, prev: PageRow | None) -> Target:
    if prev is None or prev.state != "live":
        return Target(url=url, fetch_url=fetch_url)
    return Target(url, fetch_url, prev.etag, prev.last_modified, prev.body_sha256)


def _extract(results: list[FetchResult], disabled: list[str]) -> dict[str, Extracted]:
    jobs = [ExtractJob(r.url, r.html or "", tuple(disabled)) for r in results]
    return {e.url: e for e in parallel_map(extract_one, jobs, n=len(jobs))}


def _apply(
    ctx: SourceContext,
    report: CrawlReport,
    known: dict[str, PageRow],
    rows: dict[str, PageRow],
    res: FetchResult,
    ext: Extracted | None,
    discovered: bool,
    fetch_urls: dict[str, str],
    now: float,
) -> None:
    src = ctx.source
    row = rows.get(res.url) or known.get(res.url) or PageRow(
        source=src.name, url=res.url, fetch_url=fetch_urls.get(res.url, res.url), first_seen=now
    )
    row = replace(row, outcome=res.outcome.value, status_code=res.status_code, reason=res.reason or None)
    row.last_fetched = now
    row.miss_count = 0 if discovered else row.miss_count
    rows[row.url] = row

    if res.outcome is Outcome.GONE:
        if row.state == "live":
            report.gone.append(row.url)
        row.state = "gone"
        return
    if res.outcome is Outcome.ERROR:
        row.error_count += 1
        report.errors[row.url] = res.reason
        if not discovered:
            row.miss_count += 1
            if row.miss_count >= src.fetch.missing_after and row.state == "live":
                row.state = "gone"
                row.reason = f"missing from {row.miss_count} consecutive crawls and unanswered"
                report.gone.append(row.url)
        if row.error_count >= REPEATED_ERRORS_FLAG:
            row.flag = f"{row.error_count} consecutive errors: {res.reason}"
            report.flagged[row.url] = row.flag
        return
    row.error_count = 0
    if res.outcome in (Outcome.NOT_MODIFIED, Outcome.SKIPPED):
        if res.outcome is Outcome.SKIPPED:
            report.skipped[row.url] = res.reason
        return

    # A 200 with content. A redirect moves the page's identity to its final URL.
    if res.final_url and res.final_url != res.url:
        if row.state == "live":
            report.moves[row.url] = res.final_url
        row.state, row.moved_to = "moved", res.final_url
        target = rows.get(res.final_url) or known.get(res.final_url)
        row = replace(target) if target else PageRow(
            source=src.name, url=res.final_url, fetch_url=res.final_url, first_seen=now
        )
        row.last_fetched, row.outcome, row.status_code = now, res.outcome.value, res.status_code
        rows[row.url] = row

    markdown = ext.markdown if ext else ""
    title = ext.title if ext else None
    soft = (ext.error if ext else None) or looks_soft_404(title, markdown, src.fetch)
    if soft:
        # Keep the old text and vectors; a person should look at this page.
        row.flag = soft
        row.outcome = Outcome.FLAGGED.value
        report.flagged[row.url] = soft
        if row.state != "live" and row.markdown is None:
            row.state = "live"
        return
    text_hash = hashlib.sha256(markdown.encode()).hexdigest()
    is_new = row.text_hash is None
    if text_hash != row.text_hash:
        report.new_pages += is_new
        report.changed_pages += not is_new
        row.last_changed = now
        row.change_times = [*row.change_times, now][-KEEP_CHANGE_TIMES:]
    row.state, row.moved_to, row.flag = "live", None, None
    row.etag, row.last_modified, row.body_sha256 = res.etag, res.last_modified, res.body_sha256
    row.markdown, row.text_hash = markdown, text_hash
    row.title, row.page_date = title, ext.date if ext else None


def _learn_templates(ctx: SourceContext, *, changed: bool) -> None:
    """Relearn the source's repeated blocks when any page changed, with hysteresis: a
    learned block stays until it falls under half the share, so the set does not flap."""
    store, src = ctx.store, ctx.source
    state = store.source_state(src.name)
    if state is not None and not changed:
        return
    live = [p.url for p in store.load_pages(src.name, with_markdown=False).values() if p.state == "live"]
    texts = list(store.page_markdown(src.name, live).values())
    share = src.noise.repeated_block_share
    learned = learn_template_blocks(texts, share=share)
    if state is not None:
        learned |= frozenset(state.template_blocks) & learn_template_blocks(texts, share=share / 2)
    v = ctx.versions
    state = state or SourceState(src.name, v.normalizer, v.chunker, v.model, v.dims)
    if sorted(learned) != sorted(state.template_blocks):
        state.template_blocks = sorted(learned)
        store.save_source_state(state)
    elif store.source_state(src.name) is None:
        store.save_source_state(state)
