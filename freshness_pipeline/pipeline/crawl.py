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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import urljoin

from .. import progress
from ..adapters.fetch import Discovery, DiscoveryError, Fetcher, Target
from ..adapters.state.staging import Stage
from ..config import Source
from ..core.lifecycle import (
    Answer,
    CrawlDecisions,
    CrawlRun,
    Ledger,
    LifecyclePolicy,
    drop_unlisted_candidates,
    hold_gone,
    is_live,
    needs_last_text,
    settle_near_empty,
)
from ..core.models import FetchResult, Outcome, PageText
from ..core.noise import learn_template_blocks
from ..core.observe import Turn, folded_sketch, near_empty_key, observe_redirects, observe_texts
from ..core.quarantine import Kind, Release, Verdict, judge, report_lines
from ..core.responses import UNLIKE_BELOW, NotFoundTemplate, has_login_form, looks_soft_404, resemblance, text_sketch
from ..core.state import PageRow, SourceState
from ..core.tiers import tier_for
from .context import SourceContext
from .workers import ExtractJob, extract_one, parallel_map

SAVE_BATCH = 500  # answers applied (and page rows with new text saved) at a time


@dataclass(slots=True)
class CrawlReport:
    """What the crawl found, and the run whose staging holds its page rows (`run_id`): the
    section stage reads that staging, and hands the page counts on to the index stage."""

    source: str
    run_id: str
    crawled: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    changed_pages: int = 0  # pages whose normalized text differs from last time
    new_pages: int = 0
    gone: list[str] = field(default_factory=list)
    moves: dict[str, str] = field(default_factory=dict)  # old url -> final url
    errors: dict[str, str] = field(default_factory=dict)  # url -> reason
    flagged: dict[str, str] = field(default_factory=dict)  # url -> reason
    skipped: dict[str, str] = field(default_factory=dict)  # url -> reason: not checked this run
    dead_links: list[str] = field(default_factory=list)  # answered 404/410, not indexed (never, or no longer)
    warnings: list[str] = field(default_factory=list)  # discovery bounds hit, nothing found, ...
    tiers: dict[str, int] = field(default_factory=dict)  # live pages per tier, after this crawl
    for_review: dict[str, str] = field(default_factory=dict)  # every page flagged now, url -> why
    tier: str | None = None
    fetched_at: float = 0.0  # the `last_fetched` of every page this crawl had an answer from
    seconds: float = 0.0

    def page_counts(self) -> dict[str, int]:
        """What the run line takes from the crawl (handed on, report by report, to the index stage)."""
        held = len(self.flagged.keys() - self.errors.keys())  # answered, its answer not taken
        found = {"errors": self.errors, "skipped": self.skipped, "flagged": self.flagged, "dead_links": self.dead_links}
        return {"crawled": self.crawled, **{k: len(v) for k, v in found.items()}, "held": held}

    def pages_to_review(self) -> dict[str, dict[str, str]]:
        """The pages whose answer was not a plain success, by kind: url -> reason."""
        return {"errors": self.errors, "flagged": self.flagged, "skipped": self.skipped}


@dataclass(frozen=True, slots=True)
class _Found:
    """What discovery said about the URLs of this run."""

    listed: set[str]  # normalized URLs the sitemaps / link discovery found
    lastmod: dict[str, str]  # normalized URL -> sitemap <lastmod>


def crawl(ctx: SourceContext, *, run_id: str, tier: str | None = None, release: Release | None = None) -> CrawlReport:
    """Crawl the source (or one tier of it). What a page now says is taken unless the
    quarantine holds it (`release`: the operator's, takes the held pages it covers). The
    rules are `core/lifecycle.py`'s, `core/observe.py`'s and `core/quarantine.py`'s; this
    is the I/O around them. `run_id` opens the run's staging (dropping any other run's),
    which the report names."""
    started = time.time()
    src, store = ctx.source, ctx.store
    report, staging = CrawlReport(source=src.name, run_id=run_id, tier=tier), store.crawl_staging
    with store.locks.lock(src.name):
        store.staged_runs.begin(src.name, run_id, Stage.CRAWL)
        known = store.pages.load(src.name, with_markdown=False)
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
            jobs = _extract_jobs(fetched, results, tuple(src.noise.disabled_rules), login, src.fetch.page_deadline_s)
            same: dict[str, tuple[str | None, str | None]] = {}
            new_texts: dict[str, tuple[bytes, bytes, bool]] = {}
            min_chars = src.fetch.soft_404_min_chars
            texts = _changed_texts(parallel_map(extract_one, jobs), known, same, new_texts, min_chars)
            extracted = staging.add_extracts(src.name, run_id, texts) + len(same)  # batch by batch, not kept
            not_found = _not_found_template(fetcher, targets, src) if extracted else None
        policy = src.fetch.lifecycle_rules()
        release = _release(fetcher, release)
        now = report.fetched_at = time.time()
        verdict = _judge_texts(ctx, known, results, new_texts, policy, release, now)
        fetch_urls = {t.url: t.fetch_url for t in targets}
        run = CrawlRun(src.name, now, found.listed, found.lastmod, fetch_urls, not_found, verdict.held, release)
        ledger = Ledger(known, run, policy, CrawlDecisions(taken=verdict.taken, released=verdict.released))
        _apply_in_batches(ctx, ledger, results, login, run_id, same)
        fetched_live = sum(1 for r in results if is_live(known.get(r.url)))
        decided = ledger.decisions
        hold_gone(decided, known, fetched_live=fetched_live, run=run, policy=policy)
        drop_unlisted_candidates(decided, known, found.listed)
        _save_rows(ctx, report, known, decided, run, policy)
        _report_decisions(report, decided, *report_lines(decided.held, decided.taken, decided.released, policy.rules))
        report.crawled = len(results)
        report.outcomes = dict(Counter(r.outcome.value for r in results))
        report.seconds = time.time() - started
        store.staged_runs.finish(src.name, run_id, Stage.CRAWL)
    return report


def _save_rows(
    ctx: SourceContext,
    report: CrawlReport,
    known: dict[str, PageRow],
    decided: CrawlDecisions,
    run: CrawlRun,
    policy: LifecyclePolicy,
) -> None:
    """The rows staged, the template blocks learned again when any page changed, then the
    pages held as near-empty settled on those blocks (their rows staged again), and what
    the report says of the whole source."""
    run_id, rows = report.run_id, decided.rows
    _stage_rows(ctx, rows.values(), run.now, run_id)
    live = [u for u, p in {**known, **rows}.items() if p.state == "live"]
    blocks = _learn_templates(ctx, live, run_id, changed=decided.changed_pages + decided.new_pages > 0)
    keys = {u: near_empty_key(a.text.markdown if a.text else "", u, blocks) for u, (a, _) in decided.near_empty.items()}
    settle_near_empty(decided, known, keys, run, policy)
    settled = [*keys, *(decided.moves[u] for u in keys if u in decided.moves)]  # a page taken may move
    _stage_rows(ctx, [rows[u] for u in settled], run.now, run_id)
    pages = {**known, **rows}
    report.tiers = dict(Counter(p.tier for p in pages.values() if p.state == "live"))
    report.for_review = {u: p.flag for u, p in sorted(pages.items()) if p.flag}


def _stage_rows(ctx: SourceContext, rows: Iterable[PageRow], now: float, run_id: str) -> None:
    """Each row's tier, and the rows staged (a row without its text keeps the staged one)."""
    tier_rules = ctx.source.tiers.url_rules()
    rows = list(rows)
    for row in rows:
        row.tier = tier_for(row.url, tier_rules, change_times=row.change_times, first_seen=row.first_seen, now=now)
    ctx.store.crawl_staging.save_page_rows(ctx.name, run_id, rows)


def _changed_texts(
    texts: Iterator[PageText],
    known: dict[str, PageRow],
    same: dict[str, tuple[str | None, str | None]],
    new_texts: dict[str, tuple[bytes, bytes, bool]],
    min_chars: int,
) -> Iterator[tuple[str, str, str | None, str | None, str | None]]:
    """The extracts to stage: a text equal to the page's stored one is not staged (only its
    title and date are kept, in `same`); its batch reads the stored text back. A new text's
    folded sketch, sketch and shortness land in `new_texts` (the detectors read them)."""
    for e in texts:
        k = known.get(e.url)
        text_hash = hashlib.sha256(e.markdown.encode()).hexdigest()
        if e.error is None and k is not None and k.text_hash == text_hash:
            same[e.url] = (e.title, e.date)
            continue
        if e.error is None and not looks_soft_404(e.title, e.markdown, min_chars=min_chars):
            # (an error page is held whatever its number); a sketch where a last text is there
            sketch = text_sketch(e.markdown) if is_live(k) else b""
            new_texts[e.url] = (folded_sketch(e.markdown), sketch, len(e.markdown) < min_chars)
        yield e.url, e.markdown, e.title, e.date, e.error


def _release(fetcher: Fetcher, release: Release | None) -> Release:
    """The operator's release, its page URLs normalized as the crawl's."""
    if release is None:
        return Release()
    return Release(release.everything, release.kinds, frozenset(map(fetcher.normalize, release.pages)))


def _judge_texts(
    ctx: SourceContext,
    known: dict[str, PageRow],
    results: list[FetchResult],
    new_texts: dict[str, tuple[bytes, bytes, bool]],
    policy: LifecyclePolicy,
    release: Release,
    now: float,
) -> Verdict:
    """The new texts and the redirects observed and judged, before any answer is recorded."""
    back = {r.url for r in results if r.outcome in (Outcome.OK, Outcome.NOT_MODIFIED)} - new_texts.keys()
    collapsed = {  # the texts pages are held for, but of those back to their own text
        u: bytes.fromhex(q.evidence)
        for u, k in known.items()
        if (q := k.quarantine) and q.kind is Kind.COLLAPSED and u not in back
    }
    observed = observe_texts(_turns(ctx, new_texts), collapsed) | observe_redirects(results)
    prior = {u: known[u].quarantine if u in known else None for u in observed}
    return judge(observed, prior, fetched=len(results), rules=policy.rules, release=release, now=now)


def _turns(ctx: SourceContext, new_texts: dict[str, tuple[bytes, bytes, bool]]) -> dict[str, Turn]:
    """Each new text, with its last text's folded sketch and whether it is unlike its page's
    own last text (read by chunks)."""
    had = [u for u, (_, sketch, _) in new_texts.items() if sketch]
    turns = {url: Turn(folded, None, False, short) for url, (folded, _, short) in new_texts.items()}
    for url, last in ctx.store.pages.iter_markdown(ctx.name, had):
        folded, sketch, short = new_texts[url]
        unlike = resemblance(text_sketch(last), sketch) < UNLIKE_BELOW
        turns[url] = Turn(folded, folded_sketch(last), unlike, short)
    return turns


def _apply_in_batches(
    ctx: SourceContext,
    ledger: Ledger,
    results: list[FetchResult],
    login: set[str],
    run_id: str,
    same: dict[str, tuple[str | None, str | None]],
) -> None:
    """Record the answers in their order, reading the staged extracts (and the stored text
    of the pages whose text is the same) a batch at a time. A row with new text is staged
    once its batch is recorded and its text let go, unless a redirect may still land on it
    (those are staged with the rest at the end)."""
    landing = {r.final_url for r in results if r.final_url}
    rows = ledger.decisions.rows
    for i in range(0, len(results), SAVE_BATCH):
        part = results[i : i + SAVE_BATCH]
        ok = [r.url for r in part if r.outcome is Outcome.OK]
        staged = ctx.store.crawl_staging.extracts(ctx.name, run_id, [u for u in ok if u not in same])
        texts = {url: PageText(url, *ext) for url, ext in staged.items()}
        stored = ctx.store.pages.markdown(ctx.name, [u for u in ok if u in same])
        texts |= {url: PageText(url, markdown, *same[url]) for url, markdown in stored.items()}
        for answer in _answers(ctx, ledger.known, part, texts, login):
            ledger.record(answer)
        done = [
            row
            for res in part
            if (row := rows.get(res.url)) is not None
            and row.markdown is not None
            and row.state == "live"
            and row.url not in landing
        ]
        ctx.store.crawl_staging.save_page_rows(ctx.name, run_id, done)
        for row in done:
            row.markdown = None  # staged: the final save keeps it
    ctx.store.crawl_staging.drop_extracts(ctx.name, run_id)


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
    fetched: Iterator[FetchResult],
    results: list[FetchResult],
    disabled: tuple[str, ...],
    login: set[str],
    deadline_s: float,
) -> Iterator[ExtractJob]:
    """Jobs for the pages with a body, each bound by the page deadline; every result lands
    in `results`, without its body (the URLs of pages showing a sign-in form land in `login`)."""
    for res in fetched:
        if res.outcome is Outcome.OK:
            if has_login_form(res.html or ""):
                login.add(res.url)
            yield ExtractJob(res.url, res.html or "", disabled, deadline_s)
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
    # Known live pages missing from this crawl are re-checked directly (a candidate is not).
    for row in known.values():
        if is_live(row) and row.url not in targets:
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
    state = ctx.store.sources.get(ctx.name)
    return state is not None and state.generation > 0 and state.normalizer_version != ctx.versions.normalizer


def _target(url: str, fetch_url: str, prev: PageRow | None) -> Target:
    if prev is None or prev.state != "live":
        return Target(url=url, fetch_url=fetch_url)
    return Target(url, fetch_url, prev.etag, prev.last_modified, prev.body_sha256)


def _answers(
    ctx: SourceContext,
    known: Mapping[str, PageRow],
    results: list[FetchResult],
    extracted: dict[str, PageText],
    login: set[str],
) -> list[Answer]:
    """Each result with its extraction, and the stored text of the pages whose judgment may
    need it (read in one query)."""
    wanted = [
        r.url
        for r in results
        if needs_last_text(r, extracted.get(r.url)) and (k := known.get(r.url)) is not None and k.text_hash
    ]
    last = ctx.store.pages.markdown(ctx.name, wanted) if wanted else {}
    return [Answer(r, extracted.get(r.url), last.get(r.url), r.url in login) for r in results]


def _report_decisions(report: CrawlReport, decided: CrawlDecisions, *held: str) -> None:
    report.warnings += held  # the quarantine's line per kind
    report.gone, report.moves, report.errors = decided.gone, decided.moves, decided.errors
    report.flagged, report.skipped, report.dead_links = decided.flagged, decided.skipped, decided.dead_links
    report.new_pages, report.changed_pages = decided.new_pages, decided.changed_pages


def _learn_templates(ctx: SourceContext, live: list[str], run_id: str, *, changed: bool) -> list[str]:
    """Relearn the source's repeated blocks from this run's texts when any page changed (see
    `learn_template_blocks` for the hysteresis), staged for the commit like the page rows;
    creates the source's state (with no blocks yet) on its first crawl. Returns the blocks
    this run's sections are cut with."""
    store, src = ctx.store, ctx.source
    state = store.sources.get(src.name)
    if state is None:
        v = ctx.versions
        state = SourceState(src.name, v.normalizer, v.chunker, v.model, v.dims)
        store.sources.save(state)
    elif not changed and state.normalizer_version == ctx.versions.normalizer:
        return state.template_blocks  # (blocks learned under another normalizer are learned again)
    texts = (md for _, md in store.pages.iter_markdown(src.name, live, run_id=run_id))  # not all at once
    learned = sorted(learn_template_blocks(texts, share=src.noise.repeated_block_share, keep=state.template_blocks))
    if learned != sorted(state.template_blocks):
        store.crawl_staging.save_template_blocks(src.name, run_id, learned)
    return learned
