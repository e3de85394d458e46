"""Stage 1, `fetched_pages`: crawl a source and record what each page now says.

This is the one place where a page is declared gone (404/410, or missing from the crawl
and unanswered for `missing_after` consecutive runs). Errors, soft 404s and skipped pages
keep their last good text, so nothing downstream deletes on a bad minute.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import urljoin

from .. import progress
from ..adapters.fetch import Discovery, DiscoveryError, Fetcher, Target
from ..adapters.state.staging import Staging
from ..core.state import PageRow, SourceState
from ..config import Source
from ..core.models import FetchResult, Outcome
from ..core.noise import learn_template_blocks
from ..core.status import SHORT_TEXT_CHARS, NotFoundTemplate, has_login_form, looks_soft_404
from ..core.tiers import tier_for
from .context import SourceContext
from .guards import hold_mass_gone, hold_mass_redirects
from .workers import Extracted, ExtractJob, extract_one, parallel_map

REPEATED_ERRORS_FLAG = 3  # consecutive errors before a page is flagged for review
KEEP_CHANGE_TIMES = 16
SAVE_BATCH = 500  # answers applied (and page rows with new text saved) at a time


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
    skipped: dict[str, str] = field(default_factory=dict)  # url -> reason: not checked this run
    warnings: list[str] = field(default_factory=list)  # discovery bounds hit, nothing found, ...
    tiers: dict[str, int] = field(default_factory=dict)  # live pages per tier, after this crawl
    for_review: dict[str, str] = field(default_factory=dict)  # every page flagged now, url -> why
    tier: str | None = None
    seconds: float = 0.0

    def counts(self) -> dict[str, int | float]:
        """What the run line takes from the crawl (staged for the index stage)."""
        return {
            "crawled": self.crawled,
            "errors": len(self.errors),
            "skipped": len(self.skipped),
            "flagged": len(self.flagged),
            "seconds": self.seconds,
        }


@dataclass(frozen=True, slots=True)
class _Found:
    """What discovery said about the URLs of this run."""

    listed: set[str]  # normalized URLs the sitemaps / link discovery found
    lastmod: dict[str, str]  # normalized URL -> sitemap <lastmod>


def crawl(ctx: SourceContext, *, run_id: str, tier: str | None = None, allow_mass_gone: bool = False) -> CrawlReport:
    """Crawl the source (or one tier of it). When more than `fetch.max_gone_share` of the
    live pages this run fetched would be declared gone at once (a CDN or deploy answering
    404 for a minute), they are held as errors instead, unless `allow_mass_gone` (the run's
    spike override); pages redirecting en masse to one URL are always held (`guards`).
    `run_id` opens the run's staging (dropping any other run's) and receives the counts."""
    started = time.time()
    src, store = ctx.source, ctx.store
    report, staging = CrawlReport(source=src.name, tier=tier), Staging(store)
    with store.lock(src.name):
        staging.begin(src.name, run_id, "crawl")
        known = store.load_pages(src.name, with_markdown=False)
        rules_changed = _rules_changed(ctx)
        results: list[FetchResult] = []
        login: set[str] = set()
        with Fetcher(src) as fetcher:
            discovery = progress.call(
                "discovery",
                lambda: _discover(ctx, fetcher, known, fresh=rules_changed),
                unit="URLs",
                count=lambda d: len(d.urls),
            )
            report.warnings = discovery.warnings
            targets, found = _targets(ctx, fetcher, known, discovery.urls, discovery.lastmod, tier)
            if rules_changed:
                # Stored texts were normalized by other rules: fetch and extract every page
                # again rather than trust a 304 or an identical body.
                targets = [Target(t.url, t.fetch_url) for t in targets]
            # Extraction runs in the pool while the fetch threads are still downloading.
            fetched = progress.track(
                _reusing(fetcher, targets, discovery), "fetch/extract", total=len(targets), unit="pages"
            )
            jobs = _extract_jobs(fetched, results, tuple(src.noise.disabled_rules), login)
            texts = ((e.url, e.markdown, e.title, e.date, e.error) for e in parallel_map(extract_one, jobs))
            extracted = staging.add_extracts(src.name, run_id, texts)  # batch by batch, not kept
            not_found = _not_found_template(fetcher, targets, src) if extracted else None
        results = hold_mass_redirects(results, src.fetch)
        now = time.time()
        apply = _Apply(ctx, report, known, found, {t.url: t.fetch_url for t in targets}, now)
        apply.not_found, apply.login = not_found, login
        _apply_in_batches(apply, results, staging, run_id)
        rows = apply.rows
        fetched_live = sum(1 for r in results if (k := known.get(r.url)) is not None and k.state == "live")
        report.gone = hold_mass_gone(
            report.gone, fetched_live, known, rows, report.errors, policy=src.fetch, allow=allow_mass_gone
        )
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
        staging.finish(src.name, run_id, "crawl", report.counts())
    return report


def _apply_in_batches(apply: _Apply, results: list[FetchResult], staging: Staging, run_id: str) -> None:
    """Apply the answers in their order, reading the staged extracts a batch at a time. A
    row with new text is saved once its batch is applied and its text let go, unless a
    redirect may still land on it (those are saved with the rest at the end)."""
    ctx = apply.ctx
    landing = {r.final_url for r in results if r.final_url}
    for i in range(0, len(results), SAVE_BATCH):
        part = results[i : i + SAVE_BATCH]
        staged = staging.extracts(ctx.name, run_id, [r.url for r in part if r.outcome is Outcome.OK])
        for res in part:
            ext = staged.get(res.url)
            apply(res, Extracted(res.url, *ext) if ext else None)
        done = [
            row
            for res in part
            if (row := apply.rows.get(res.url)) is not None
            and row.markdown is not None
            and row.state == "live"
            and row.url not in landing
        ]
        ctx.store.save_pages(done)
        for row in done:
            row.markdown = None  # stored: the final save keeps it
    staging.drop_extracts(ctx.name, run_id)


def _discover(ctx: SourceContext, fetcher: Fetcher, known: dict[str, PageRow], *, fresh: bool) -> Discovery:
    """What discovery found; fails (naming the source, nothing changed) when it could not
    finish, or found nothing for a source that has no pages yet."""
    name = ctx.source.name
    bodies = {} if fresh else {u: _target(u, r.fetch_url, r) for u, r in known.items()}
    try:
        discovery = fetcher.discover(bodies)
    except DiscoveryError as exc:
        raise DiscoveryError(f"source {name!r}: {exc}; the crawl stopped before fetching, nothing was changed") from exc
    if not discovery.urls:
        why = "; ".join(discovery.warnings) or "the sitemap lists no page"
        if not any(p.state == "live" for p in known.values()):
            raise DiscoveryError(f"source {name!r}: discovery found no pages ({why}); nothing was changed")
        discovery.warnings.append(f"discovery found no pages ({why}); known pages were fetched directly")
    return discovery


def _reusing(fetcher: Fetcher, targets: list[Target], discovery: Discovery) -> Iterator[FetchResult]:
    """Each target's answer: link discovery's when it fetched the page already this run."""
    todo = []
    for t in targets:
        if (res := discovery.answer(t.url)) is not None:
            yield res
        else:
            todo.append(t)
    yield from fetcher.fetch(todo)


def _not_found_template(fetcher: Fetcher, targets: list[Target], src: Source) -> NotFoundTemplate | None:
    """The site's answer to a URL that cannot exist, when it is a 200 (a soft 404 page),
    fetched once per run; its fingerprint tells error pages from real ones."""
    if not targets:
        return None
    probe = urljoin(targets[0].fetch_url, f"/freshness-probe-{uuid.uuid4().hex[:16]}")
    (res,) = fetcher.fetch([Target(fetcher.normalize(probe), probe)])
    if res.outcome is not Outcome.OK:
        return None
    ext = extract_one(ExtractJob(res.url, res.html or "", tuple(src.noise.disabled_rules)))
    return NotFoundTemplate(ext.title, ext.markdown, served_at=res.final_url)


def _extract_jobs(
    fetched: Iterator[FetchResult], results: list[FetchResult], disabled: tuple[str, ...], login: set[str]
) -> Iterator[ExtractJob]:
    """Jobs for the pages with a body; every result lands in `results`, without its body
    (the URLs of pages showing a sign-in form land in `login`)."""
    for res in fetched:
        if res.outcome is Outcome.OK:
            if has_login_form(res.html or ""):
                login.add(res.url)
            yield ExtractJob(res.url, res.html or "", disabled)
        results.append(replace(res, html=None, links=()))  # the body and links are done with


def _targets(
    ctx: SourceContext,
    fetcher: Fetcher,
    known: dict[str, PageRow],
    raw_urls: list[str],
    lastmod: dict[str, str],
    tier: str | None,
) -> tuple[list[Target], _Found]:
    """What to fetch this run, and what discovery found."""
    targets: dict[str, Target] = {}
    listed: set[str] = set()
    for raw in raw_urls:
        url = fetcher.normalize(raw)  # discovery normalized it already: remembered
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


class _Apply:
    """Applies one run's answers to the page rows (`rows`), filling in the report."""

    def __init__(
        self,
        ctx: SourceContext,
        report: CrawlReport,
        known: dict[str, PageRow],
        found: _Found,
        fetch_urls: dict[str, str],
        now: float,
    ) -> None:
        self.ctx, self.report, self.known, self.found = ctx, report, known, found
        self.fetch_urls, self.now = fetch_urls, now
        self.rows: dict[str, PageRow] = {}
        self.not_found: NotFoundTemplate | None = None
        self.login: set[str] = set()

    def __call__(self, res: FetchResult, ext: Extracted | None) -> None:
        src, now = self.ctx.source, self.now
        row = (
            self.rows.get(res.url)
            or self.known.get(res.url)
            or PageRow(source=src.name, url=res.url, fetch_url=self.fetch_urls.get(res.url, res.url), first_seen=now)
        )
        row = replace(row, outcome=res.outcome.value, status_code=res.status_code, reason=res.reason or None)
        row.last_fetched = now
        row.lastmod = self.found.lastmod.get(row.url, row.lastmod)
        listed = res.url in self.found.listed
        if listed:
            row.miss_count = 0
        self.rows[row.url] = row
        if res.outcome is Outcome.ERROR:
            self._error(row, res, listed)
        elif res.outcome is Outcome.SKIPPED:
            self.report.skipped[row.url] = res.reason
        elif res.final_url and res.temporary and row.text_hash is not None:
            # Only 301/308 move a page (or let its target's 404 delete it): it keeps its URL
            # and its last text.
            why = f"temporary redirect to {res.final_url} ({res.reason}): not a move, its last text is kept"
            row.outcome, row.reason = Outcome.SKIPPED.value, why
            self.report.skipped[row.url] = why
        elif res.outcome is Outcome.GONE:
            if row.state == "live":
                self.report.gone.append(row.url)
            row.state, row.flag = "gone", None
        else:
            row.error_count, row.miss_count = 0, 0  # it answered
            self._content(row, res, ext)

    def _error(self, row: PageRow, res: FetchResult, listed: bool) -> None:
        fp = self.ctx.source.fetch
        row.error_count += 1
        self.report.errors[row.url] = res.reason
        if not listed:  # missing from the crawl and unanswered: one more miss
            row.miss_count += 1
            if row.miss_count >= fp.missing_after and row.state == "live":
                row.state = "gone"
                row.reason = f"missing from {row.miss_count} consecutive crawls and unanswered"
                self.report.gone.append(row.url)
        if row.error_count >= REPEATED_ERRORS_FLAG:
            row.flag = f"{row.error_count} consecutive errors: {res.reason}"
            self.report.flagged[row.url] = row.flag

    def _content(self, row: PageRow, res: FetchResult, ext: Extracted | None) -> None:
        ctx = self.ctx
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
            markdown = ctx.store.page_markdown(ctx.name, [row.url]).get(row.url, "")
            title, date = row.title, row.page_date
        else:
            markdown = ext.markdown if ext else ""
            title, date = (ext.title, ext.date) if ext else (None, None)
            if soft := (ext.error if ext else None) or self._soft_404(row, res, title, markdown):
                # Keep the old text and vectors (and do not follow a redirect to a wall).
                where = f" (after a redirect to {res.final_url})" if res.final_url else ""
                row.flag, row.outcome = soft + where, Outcome.FLAGGED.value
                self.report.flagged[row.url] = row.flag
                return
        # A permanent redirect moves the page's identity (and its sections) to its final URL.
        if res.final_url and not res.temporary:
            row = self._move(row, res)
        self._store_text(row, res, markdown, title, date)

    def _soft_404(self, row: PageRow, res: FetchResult, title: str | None, markdown: str) -> str | None:
        """Why this 200 is an error page: judged on its title and h1, the site's not-found
        page and the page's own last text (loaded only when the new one is short)."""
        had = None  # a long text is no error page whatever it had: the old one is not loaded
        if row.text_hash is not None and row.state == "live" and len(markdown) < SHORT_TEXT_CHARS:
            had = len(self.ctx.store.page_markdown(self.ctx.name, [row.url]).get(row.url, ""))
        template = self.not_found
        if template is not None and template.served_at in (row.url, res.final_url or row.url):
            template = None  # the page the probe landed on is not an error page itself
        return looks_soft_404(
            title, markdown, self.ctx.source.fetch, had_chars=had, not_found=template, login_form=row.url in self.login
        )

    def _store_text(self, row: PageRow, res: FetchResult, markdown: str, title: str | None, date: str | None) -> None:
        text_hash = hashlib.sha256(markdown.encode()).hexdigest()
        is_new = row.text_hash is None
        if text_hash != row.text_hash:
            self.report.new_pages += is_new
            self.report.changed_pages += not is_new
            row.last_changed = self.now
            row.change_times = [*row.change_times, self.now][-KEEP_CHANGE_TIMES:]
        row.state, row.moved_to, row.flag = "live", None, None
        unchanged = res.outcome is Outcome.NOT_MODIFIED
        row.etag = res.etag or (row.etag if unchanged else None)
        row.last_modified = res.last_modified or (row.last_modified if unchanged else None)
        row.body_sha256 = res.body_sha256 or row.body_sha256
        row.markdown, row.text_hash = markdown, text_hash
        row.title, row.page_date = title, date

    def _move(self, row: PageRow, res: FetchResult) -> PageRow:
        """Mark `row` as moved to the final URL; return the final URL's row to fill in."""
        final = res.final_url or row.url
        target = self.rows.get(final) or self.known.get(final)
        if row.state == "live" and row.text_hash is not None:
            self.report.moves[row.url] = final
        carried = row.text_hash if row.state == "live" else None  # a pure move is no new text
        new = (
            replace(target)
            if target
            else PageRow(
                source=self.ctx.name,
                url=final,
                fetch_url=final,
                first_seen=self.now,
                text_hash=carried,
                change_times=list(row.change_times),
            )
        )
        row.state, row.moved_to = "moved", final
        new.last_fetched, new.outcome, new.status_code = self.now, res.outcome.value, res.status_code
        new.reason, new.miss_count, new.error_count = res.reason or None, 0, 0
        self.rows[new.url] = new
        return new


def _learn_templates(ctx: SourceContext, live: list[str], *, changed: bool) -> None:
    """Relearn the source's repeated blocks when any page changed (see
    `learn_template_blocks` for the hysteresis); creates the source's state on its first crawl."""
    store, src = ctx.store, ctx.source
    state = store.source_state(src.name)
    if state is not None and not changed:
        return
    kept = state.template_blocks if state else ()
    texts = (markdown for _, markdown in store.iter_markdown(src.name, live))  # not all at once
    learned = sorted(learn_template_blocks(texts, share=src.noise.repeated_block_share, keep=kept))
    if state is None:
        v = ctx.versions
        state = SourceState(src.name, v.normalizer, v.chunker, v.model, v.dims)
    elif learned == sorted(state.template_blocks):
        return
    state.template_blocks = learned
    store.save_source_state(state)
