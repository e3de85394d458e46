"""Stage 1, `fetched_pages`: crawl a source and record what each page now says.

This is the one place where a page is declared gone (404/410, or missing from the crawl
and unanswered for `missing_after` consecutive runs). Errors, soft 404s and skipped pages
keep their last good text, so nothing downstream deletes on a bad minute.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from .. import progress
from ..adapters.fetch import DiscoveryError, Fetcher, Target
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
    tiers: dict[str, int] = field(default_factory=dict)  # live pages per tier, after this crawl
    for_review: dict[str, str] = field(default_factory=dict)  # every page flagged now, url -> why
    tier: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class _Found:
    """What discovery said about the URLs of this run."""

    listed: set[str]  # normalized URLs the sitemaps / link discovery found
    lastmod: dict[str, str]  # normalized URL -> sitemap <lastmod>


def crawl(ctx: SourceContext, *, tier: str | None = None, allow_mass_gone: bool = False) -> CrawlReport:
    """Crawl the source (or one tier of it). When more than `fetch.max_gone_share` of its
    live pages would be declared gone at once (a CDN or deploy answering 404 for a minute),
    they are held as errors instead, unless `allow_mass_gone` (the run's spike override)."""
    started = time.time()
    src, store = ctx.source, ctx.store
    report = CrawlReport(source=src.name, tier=tier)
    with store.lock(src.name):
        known = store.load_pages(src.name, with_markdown=False)
        results: list[FetchResult] = []
        with Fetcher(src) as fetcher:
            try:
                discovery = progress.call("discovery", fetcher.discover, unit="URLs", count=lambda d: len(d.urls))
            except DiscoveryError as exc:
                raise DiscoveryError(
                    f"source {src.name!r}: {exc}; the crawl stopped before fetching, nothing was changed"
                ) from exc
            targets, found = _targets(ctx, known, discovery.urls, discovery.lastmod, tier)
            if _rules_changed(ctx):
                # Stored texts were normalized by other rules: fetch and extract every page
                # again rather than trust a 304 or an identical body.
                targets = [Target(t.url, t.fetch_url) for t in targets]
            # Extraction runs in the pool while the fetch threads are still downloading.
            fetched = progress.track(fetcher.fetch(targets), "fetch/extract", total=len(targets), unit="pages")
            jobs = _extract_jobs(fetched, results, tuple(src.noise.disabled_rules))
            extracted = {e.url: e for e in parallel_map(extract_one, jobs)}
        now = time.time()
        rows: dict[str, PageRow] = {}
        fetch_urls = {t.url: t.fetch_url for t in targets}
        for res in results:
            _apply(ctx, report, known, rows, res, extracted.get(res.url), found, fetch_urls, now)
        _hold_mass_gone(ctx, report, known, rows, allow=allow_mass_gone)
        for row in rows.values():
            row.tier = tier_for(row.url, src.tiers, change_times=row.change_times, first_seen=row.first_seen, now=now)
        store.save_pages(rows.values())  # rows loaded without their text keep it
        pages = {**known, **rows}
        report.tiers = dict(Counter(p.tier for p in pages.values() if p.state == "live"))
        report.for_review = {u: p.flag for u, p in sorted(pages.items()) if p.flag}
        live = [u for u, p in pages.items() if p.state == "live"]
        _learn_templates(ctx, live, changed=report.changed_pages + report.new_pages > 0)
    report.crawled = len(results)
    report.outcomes = dict(Counter(r.outcome.value for r in results))
    report.seconds = time.time() - started
    return report


def _hold_mass_gone(
    ctx: SourceContext, report: CrawlReport, known: dict[str, PageRow], rows: dict[str, PageRow], *, allow: bool
) -> None:
    live = sum(1 for p in known.values() if p.state == "live")
    limit = ctx.source.fetch.max_gone_share
    if allow or len(report.gone) < 2 or len(report.gone) <= limit * live:
        return
    why = (
        f"held: {len(report.gone)} of {live} live pages would be gone in one crawl (over "
        f"fetch.max_gone_share {limit:.0%}); treated as an outage, nothing deleted. If the "
        "site really lost them, re-run with the spike override (freshness run --allow-spike)"
    )
    for url in report.gone:
        rows[url] = replace(known[url], outcome=Outcome.ERROR.value, reason=why, last_fetched=rows[url].last_fetched)
        report.errors[url] = why
    report.gone = []


def _extract_jobs(
    fetched: Iterator[FetchResult], results: list[FetchResult], disabled: tuple[str, ...]
) -> Iterator[ExtractJob]:
    """Jobs for the pages with a body; every result lands in `results`, without its body."""
    for res in fetched:
        if res.outcome is Outcome.OK:
            yield ExtractJob(res.url, res.html or "", disabled)
            res = replace(res, html=None)
        results.append(res)


def _targets(
    ctx: SourceContext,
    known: dict[str, PageRow],
    raw_urls: list[str],
    lastmod: dict[str, str],
    tier: str | None,
) -> tuple[list[Target], _Found]:
    """What to fetch this run, and what discovery found."""
    fp = ctx.source.fetch
    targets: dict[str, Target] = {}
    listed: set[str] = set()
    for raw in raw_urls:
        url = normalize_url(raw, keep_params=fp.keep_query_params, drop_query=fp.drop_query)
        listed.add(url)
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
        t for t in targets.values() if tier is None or _in_tier(t.url, known.get(t.url), tier, lastmod.get(t.url), ctx)
    ]
    return chosen, _Found(listed, lastmod)


def _in_tier(url: str, prev: PageRow | None, tier: str, lastmod: str | None, ctx: SourceContext) -> bool:
    """Whether a tier-limited run fetches this page: a page never fetched (a new page is
    indexed by the next run of any tier), one of its tier, or one whose sitemap lastmod is
    newer than its last fetch (a hint to look sooner)."""
    if prev is None or prev.last_fetched is None:
        return True
    return lastmod_is_newer(lastmod, prev.last_fetched) or prev.tier == tier


def lastmod_is_newer(lastmod: str | None, last_fetched: float | None) -> bool:
    """A W3C datetime (or date) later than `last_fetched`; unparseable hints are ignored."""
    if not lastmod:
        return False
    try:
        when = datetime.fromisoformat(lastmod.strip())
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return last_fetched is None or when.timestamp() > last_fetched


def _rules_changed(ctx: SourceContext) -> bool:
    state = ctx.store.source_state(ctx.name)
    return state is not None and state.generation > 0 and state.normalizer_version != ctx.versions.normalizer


def _target(url: str, fetch_url: str, prev: PageRow | None) -> Target:
    if prev is None or prev.state != "live":
        return Target(url=url, fetch_url=fetch_url)
    return Target(url, fetch_url, prev.etag, prev.last_modified, prev.body_sha256)


def _apply(
    ctx: SourceContext,
    report: CrawlReport,
    known: dict[str, PageRow],
    rows: dict[str, PageRow],
    res: FetchResult,
    ext: Extracted | None,
    found: _Found,
    fetch_urls: dict[str, str],
    now: float,
) -> None:
    src = ctx.source
    row = (
        rows.get(res.url)
        or known.get(res.url)
        or PageRow(source=src.name, url=res.url, fetch_url=fetch_urls.get(res.url, res.url), first_seen=now)
    )
    row = replace(row, outcome=res.outcome.value, status_code=res.status_code, reason=res.reason or None)
    row.last_fetched = now
    row.lastmod = found.lastmod.get(row.url, row.lastmod)
    listed = res.url in found.listed
    if listed:
        row.miss_count = 0
    rows[row.url] = row

    if res.outcome is Outcome.GONE:
        if row.state == "live":
            report.gone.append(row.url)
        row.state, row.flag = "gone", None
        return
    if res.outcome is Outcome.ERROR:
        row.error_count += 1
        report.errors[row.url] = res.reason
        if not listed:  # missing from the crawl and unanswered: one more miss
            row.miss_count += 1
            if row.miss_count >= src.fetch.missing_after and row.state == "live":
                row.state = "gone"
                row.reason = f"missing from {row.miss_count} consecutive crawls and unanswered"
                report.gone.append(row.url)
        if row.error_count >= REPEATED_ERRORS_FLAG:
            row.flag = f"{row.error_count} consecutive errors: {res.reason}"
            report.flagged[row.url] = row.flag
        return
    if res.outcome is Outcome.SKIPPED:
        report.skipped[row.url] = res.reason
        return
    row.error_count, row.miss_count = 0, 0  # it answered
    if res.outcome is Outcome.NOT_MODIFIED and not res.final_url:
        # The indexed version, so no longer in doubt. A 200 with the same bytes brings
        # fresh validators: next time it can be a 304.
        row.flag = None
        row.etag = res.etag or row.etag
        row.last_modified = res.last_modified or row.last_modified
        return

    if res.outcome is Outcome.NOT_MODIFIED:  # redirected to the very bytes it had before
        if row.text_hash is None:
            return
        markdown = ctx.store.page_markdown(src.name, [row.url]).get(row.url, "")
        title, date = row.title, row.page_date
    else:
        markdown = ext.markdown if ext else ""
        title, date = (ext.title, ext.date) if ext else (None, None)
        soft = (ext.error if ext else None) or looks_soft_404(title, markdown, src.fetch)
        if soft:
            # Keep the old text and vectors (and do not follow a redirect to a wall).
            where = f" (after a redirect to {res.final_url})" if res.final_url else ""
            row.flag, row.outcome = soft + where, Outcome.FLAGGED.value
            report.flagged[row.url] = row.flag
            return

    # A redirect moves the page's identity (and its sections) to its final URL.
    if res.final_url:
        row = _move(ctx, report, rows, row, rows.get(res.final_url) or known.get(res.final_url), res, now)

    text_hash = hashlib.sha256(markdown.encode()).hexdigest()
    is_new = row.text_hash is None
    if text_hash != row.text_hash:
        report.new_pages += is_new
        report.changed_pages += not is_new
        row.last_changed = now
        row.change_times = [*row.change_times, now][-KEEP_CHANGE_TIMES:]
    row.state, row.moved_to, row.flag = "live", None, None
    row.etag = res.etag or (row.etag if res.outcome is Outcome.NOT_MODIFIED else None)
    row.last_modified = res.last_modified or (row.last_modified if res.outcome is Outcome.NOT_MODIFIED else None)
    row.body_sha256 = res.body_sha256 or row.body_sha256
    row.markdown, row.text_hash = markdown, text_hash
    row.title, row.page_date = title, date


def _move(
    ctx: SourceContext,
    report: CrawlReport,
    rows: dict[str, PageRow],
    row: PageRow,
    target: PageRow | None,
    res: FetchResult,
    now: float,
) -> PageRow:
    """Mark `row` as moved to the final URL; return the final URL's row to fill in."""
    final = res.final_url or row.url
    if row.state == "live" and row.text_hash is not None:
        report.moves[row.url] = final
    carried = row.text_hash if row.state == "live" else None  # a pure move is no new text
    new = (
        replace(target)
        if target
        else PageRow(
            source=ctx.source.name,
            url=final,
            fetch_url=final,
            first_seen=now,
            text_hash=carried,
            change_times=list(row.change_times),
        )
    )
    row.state, row.moved_to = "moved", final
    new.last_fetched, new.outcome, new.status_code = now, res.outcome.value, res.status_code
    new.reason, new.miss_count, new.error_count = res.reason or None, 0, 0
    rows[new.url] = new
    return new


def _learn_templates(ctx: SourceContext, live: list[str], *, changed: bool) -> None:
    """Relearn the source's repeated blocks when any page changed (see
    `learn_template_blocks` for the hysteresis); creates the source's state on its first crawl."""
    store, src = ctx.store, ctx.source
    state = store.source_state(src.name)
    if state is not None and not changed:
        return
    kept = state.template_blocks if state else ()
    texts = store.page_markdown(src.name, live).values()
    learned = sorted(learn_template_blocks(texts, share=src.noise.repeated_block_share, keep=kept))
    if state is None:
        v = ctx.versions
        state = SourceState(src.name, v.normalizer, v.chunker, v.model, v.dims)
    elif learned == sorted(state.template_blocks):
        return
    state.template_blocks = learned
    store.save_source_state(state)
