"""The page lifecycle: what one crawl's answers do to the page rows. Pure: no I/O.

The one place where a page is declared gone:

- 404/410: gone. 5xx, 429, a timeout: kept with its last text, retried next run.
- Missing from the crawl (no sitemap or link lists it) and unanswered: gone only after
  `missing_after` consecutive misses; listed again, or answering, resets the count.
- A page the quarantine holds (`quarantine.py`: the detectors of `observe.py` and their
  rules) keeps its row, last text and records, is flagged, and is no error: a 200 that
  reads as an error page, a stub, a text unlike its own (or like other pages'), 404s or
  redirects to one URL on many pages at once. So is a page that failed to extract.
- Only a 301/308 moves a page (its row and text go to the final URL); a 302/303/307 keeps
  it under its own URL with its last text.
- A page is live once it answered with a page. A URL that was listed but never answered
  with one is a candidate: its 404 or its errors hold nothing and alarm nobody.

The shell (`pipeline/crawl.py`) fetches and extracts, observes the new texts and the
redirects and judges them (`CrawlRun.held`), records the answers in a `Ledger` (reading
the stored text of the pages `needs_last_text` names), then judges the 404s
(`hold_gone`) and, once the run's template blocks are known, the stubs
(`settle_near_empty`), and saves the rows. `settle_crawl` is the run in one call (the
tests use it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field, replace

from .models import FetchResult, Outcome, PageText
from .observe import error_page
from .quarantine import Kind, Observation, Quarantine, Release, Rules, continued, judge
from .responses import SHORT_TEXT_CHARS, NotFoundTemplate
from .state import PageRow

__all__ = [
    "Answer",
    "CrawlDecisions",
    "CrawlRun",
    "Ledger",
    "LifecyclePolicy",
    "apply_answers",
    "drop_unlisted_candidates",
    "hold_gone",
    "is_live",
    "needs_last_text",
    "settle_crawl",
    "settle_near_empty",
]


@dataclass(frozen=True, slots=True)
class LifecyclePolicy:
    """The numbers of the rules (`fetch.*` of the sources file, and two fixed ones)."""

    missing_after: int = 3  # consecutive unanswered misses before a known page is gone
    rules: Rules = field(default_factory=Rules)  # the quarantine's table
    soft_404_min_chars: int = 200  # a page that had more text and drops under this is flagged
    errors_before_flag: int = 3  # consecutive errors before a page is flagged for review
    kept_change_times: int = 16  # the last change times a row keeps (for its tier)


@dataclass(frozen=True, slots=True)
class CrawlRun:
    """What the run knows besides the answers."""

    source: str
    now: float
    listed: Set[str] = frozenset()  # normalized URLs discovery found (sitemaps, links)
    lastmod: Mapping[str, str] = field(default_factory=dict)  # URL -> sitemap <lastmod>
    fetch_urls: Mapping[str, str] = field(default_factory=dict)  # URL -> the URL fetched
    not_found: NotFoundTemplate | None = None  # the site's answer to a URL that cannot exist
    held: Mapping[str, Quarantine] = field(default_factory=dict)  # URL -> its hold, judged before the answers
    release: Release = Release()  # the operator's


@dataclass(frozen=True, slots=True)
class Answer:
    """One page's fetch, with what the shell read for it."""

    result: FetchResult
    text: PageText | None = None  # its extraction, for an OK answer
    last_text: str | None = None  # its stored text, read when `needs_last_text` says so
    login_form: bool = False  # the body has a password field


@dataclass(slots=True)
class CrawlDecisions:
    """The rows to save (every page answered, and every move's target) and why."""

    rows: dict[str, PageRow] = field(default_factory=dict)
    gone: list[str] = field(default_factory=list)
    moves: dict[str, str] = field(default_factory=dict)  # old url -> final url
    errors: dict[str, str] = field(default_factory=dict)  # url -> reason
    flagged: dict[str, str] = field(default_factory=dict)  # url -> reason
    skipped: dict[str, str] = field(default_factory=dict)  # url -> reason: not checked this run
    dead_links: list[str] = field(default_factory=list)  # answered 404/410 and not indexed: never, or no longer
    near_empty: dict[str, tuple[Answer, Observation]] = field(default_factory=dict)  # held as near-empty
    held: dict[str, Kind] = field(default_factory=dict)  # url -> why the quarantine holds it this run
    taken: dict[str, Kind] = field(default_factory=dict)  # ... took it after a hold (confirmed)
    released: dict[str, Kind] = field(default_factory=dict)  # ... took it on the operator's release
    new_pages: int = 0
    changed_pages: int = 0  # pages whose normalized text differs from last time


def needs_last_text(result: FetchResult, text: PageText | None) -> bool:
    """Whether judging this answer may need the page's stored text: a redirect to the very
    bytes it had, or a short new text (a page that had text can turn near-empty)."""
    if result.outcome is Outcome.NOT_MODIFIED:
        return result.final_url is not None
    return result.outcome is Outcome.OK and len(text.markdown if text else "") < SHORT_TEXT_CHARS


def is_live(row: PageRow | None) -> bool:
    """A page that answered with a page and has not gone since."""
    return row is not None and row.state == "live" and row.text_hash is not None


def apply_answers(
    known: Mapping[str, PageRow], answers: Iterable[Answer], run: CrawlRun, policy: LifecyclePolicy
) -> CrawlDecisions:
    """Each answer applied, in order, to its page's row (`known` is left as it was)."""
    ledger = Ledger(known, run, policy)
    for answer in answers:
        ledger.record(answer)
    return ledger.decisions


def drop_unlisted_candidates(decisions: CrawlDecisions, known: Mapping[str, PageRow], listed: Set[str]) -> None:
    """A candidate unlisted and unanswered this run was never a page: it goes, flag and all."""
    for url, row in known.items():
        if row.state == "candidate" and url not in listed and url not in decisions.rows:
            decisions.rows[url] = replace(row, state="gone", flag=None, quarantine=None)


class Ledger:
    """The rows of one run as its answers arrive, and the decisions taken on them."""

    def __init__(
        self,
        known: Mapping[str, PageRow],
        run: CrawlRun,
        policy: LifecyclePolicy,
        decisions: CrawlDecisions | None = None,
    ) -> None:
        """`decisions`: those of this run to carry on (a new, empty set when None)."""
        self.known, self.run, self.policy = known, run, policy
        self.decisions = CrawlDecisions() if decisions is None else decisions

    def record(self, answer: Answer) -> None:
        res, run, out = answer.result, self.run, self.decisions
        fetch_url = run.fetch_urls.get(res.url, res.url)
        row = out.rows.get(res.url) or self.known.get(res.url) or self._candidate(res.url, fetch_url)
        row = replace(row, outcome=res.outcome.value, status_code=res.status_code, reason=res.reason or None)
        row.last_fetched = run.now
        row.lastmod = run.lastmod.get(row.url, row.lastmod)
        listed = res.url in run.listed
        if listed:
            row.miss_count = 0
        out.rows[row.url] = row
        if (held := run.held.get(row.url)) is not None:
            self.hold(row, held, flag_for(held))
        elif res.outcome is Outcome.ERROR:
            self._count_error(row, res, listed)
        elif res.outcome is Outcome.SKIPPED:
            out.skipped[row.url] = res.reason
        elif res.final_url and res.temporary and row.text_hash is not None:
            why = f"temporary redirect to {res.final_url} ({res.reason}): not a move, its last text is kept"
            row.outcome, row.reason = Outcome.SKIPPED.value, why
            out.skipped[row.url] = why
        elif res.outcome is Outcome.GONE:
            (out.gone if is_live(row) else out.dead_links).append(row.url)
            row.state, row.flag, row.quarantine = "gone", None, None  # a candidate just goes: it never was a page
        else:
            row.error_count, row.miss_count, row.quarantine = 0, 0, None  # it answered
            self._take_answer(row, answer)

    def hold(self, row: PageRow, state: Quarantine, why: str) -> None:
        """Held: the row's text, validators and records as they were, flagged, no error."""
        out = self.decisions
        row.outcome, row.flag, row.quarantine = Outcome.FLAGGED.value, why, state
        out.flagged[row.url] = why
        out.held[row.url] = state.kind

    def _candidate(self, url: str, fetch_url: str) -> PageRow:
        """The row of a URL never seen: live once it answers with a page."""
        return PageRow(source=self.run.source, url=url, fetch_url=fetch_url, first_seen=self.run.now, state="candidate")

    def _count_error(self, row: PageRow, res: FetchResult, listed: bool) -> None:
        """An unanswered page keeps its text; missing from the crawl too, it is one miss
        nearer gone; repeated errors flag it."""
        out, policy = self.decisions, self.policy
        row.error_count += 1
        out.errors[row.url] = res.reason
        if not listed:
            row.miss_count += 1
            if row.miss_count >= policy.missing_after and is_live(row):
                row.state = "gone"
                row.reason = f"missing from {row.miss_count} consecutive crawls and unanswered"
                out.gone.append(row.url)
        if row.error_count >= policy.errors_before_flag:
            row.flag = f"{row.error_count} consecutive errors: {res.reason}"
            out.flagged[row.url] = row.flag

    def _take_answer(self, row: PageRow, answer: Answer) -> None:
        """A 200 or a 304: new validators, a new text, a move, or a flag (soft 404)."""
        res, ext = answer.result, answer.text
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
            markdown, title, date = answer.last_text or "", row.title, row.page_date
        else:
            markdown = ext.markdown if ext else ""
            title, date = (ext.title, ext.date) if ext else (None, None)
            if ext and ext.error:  # the old text and vectors kept
                row.flag, row.outcome = ext.error, Outcome.FLAGGED.value
                self.decisions.flagged[row.url] = row.flag
                return
            if seen := self._error_page(row, answer, markdown):  # held (no redirect followed to a wall)
                where = f" (after a redirect to {res.final_url})" if res.final_url else ""
                if seen.kind is Kind.SOFT_404:
                    prior = self.known[row.url].quarantine if row.url in self.known else None
                    rule = self.policy.rules[seen.kind]
                    self.hold(
                        row, continued(prior, seen.kind, seen.evidence, self.run.now, rule=rule), seen.why + where
                    )
                else:  # judged once the run's template blocks are known (`settle_near_empty`)
                    row.flag, row.outcome = seen.why + where + _STUB, Outcome.FLAGGED.value
                    self.decisions.flagged[row.url] = row.flag
                    self.decisions.near_empty[row.url] = (answer, seen)
                return
        self._take(row, res, markdown, title, date)

    def take(self, answer: Answer) -> None:
        """Take the text of an answer this run held as near-empty: confirmed or released."""
        res, ext = answer.result, answer.text or PageText(answer.result.url, "", None, None)
        row = self.decisions.rows[res.url]
        self.decisions.flagged.pop(row.url, None)
        row.outcome, row.flag, row.quarantine = res.outcome.value, None, None
        self._take(row, res, ext.markdown, ext.title, ext.date)

    def _take(self, row: PageRow, res: FetchResult, markdown: str, title: str | None, date: str | None) -> None:
        if res.final_url and not res.temporary:  # a 301/308 moves the page to its final URL
            row = self._move_to_final_url(row, res)
        self._take_text(row, res, markdown, title, date)

    def _error_page(self, row: PageRow, answer: Answer, markdown: str) -> Observation | None:
        """A soft 404 or a stub (judged on its last text, when the new one is short)."""
        res, ext, min_chars = answer.result, answer.text, self.policy.soft_404_min_chars
        had = None  # a long text is no error page whatever it had
        if row.text_hash is not None and row.state == "live" and len(markdown) < SHORT_TEXT_CHARS:
            had = len(answer.last_text or "")
        template = self.run.not_found
        if template is not None and template.served_at in (row.url, res.final_url or row.url):
            template = None  # the page the probe landed on is not an error page itself
        title = ext.title if ext else None
        return error_page(
            title, markdown, min_chars=min_chars, had_chars=had, not_found=template, login_form=answer.login_form
        )

    def _take_text(self, row: PageRow, res: FetchResult, markdown: str, title: str | None, date: str | None) -> None:
        """The page is live with this text; a new or changed text is counted and dated."""
        out, now = self.decisions, self.run.now
        text_hash = hashlib.sha256(markdown.encode()).hexdigest()
        is_new = row.text_hash is None
        if text_hash != row.text_hash:
            out.new_pages += is_new
            out.changed_pages += not is_new
            row.last_changed = now
            row.change_times = [*row.change_times, now][-self.policy.kept_change_times :]
        row.state, row.moved_to, row.flag = "live", None, None
        unchanged = res.outcome is Outcome.NOT_MODIFIED
        row.etag = res.etag or (row.etag if unchanged else None)
        row.last_modified = res.last_modified or (row.last_modified if unchanged else None)
        row.body_sha256 = res.body_sha256 or row.body_sha256
        if not self._stored(row, text_hash):
            row.markdown = markdown  # to be saved; a text already stored under its URL is not rewritten
        row.text_hash, row.title, row.page_date = text_hash, title, date

    def _stored(self, row: PageRow, text_hash: str) -> bool:
        """Whether the store holds this very text under the row's URL: the row is a stored
        one (not one a move just made) with no text waiting to be saved, and the same hash."""
        known = self.known.get(row.url)
        return row.markdown is None and known is not None and known.text_hash is not None and row.text_hash == text_hash

    def _move_to_final_url(self, row: PageRow, res: FetchResult) -> PageRow:
        """Mark `row` as moved to the final URL; return the final URL's row to fill in."""
        out, now = self.decisions, self.run.now
        final = res.final_url or row.url
        target = out.rows.get(final) or self.known.get(final)
        if row.state == "live" and row.text_hash is not None:
            out.moves[row.url] = final
        carried = row.text_hash if row.state == "live" else None  # a pure move is no new text
        new = (
            replace(target)
            if target
            else PageRow(
                source=self.run.source,
                url=final,
                fetch_url=final,
                first_seen=now,
                text_hash=carried,
                change_times=list(row.change_times),
            )
        )
        row.state, row.moved_to = "moved", final
        if final in out.gone:  # it answered 404 earlier in this run, yet serves the moved page
            out.gone.remove(final)
        new.last_fetched, new.outcome, new.status_code = now, res.outcome.value, res.status_code
        new.reason, new.miss_count, new.error_count = res.reason or None, 0, 0
        out.rows[new.url] = new
        return new


_STUB = ": held, taken if the next run sees the same text"


def flag_for(state: Quarantine) -> str:
    """The flag of a page the quarantine holds for a kind judged over the run."""
    return {
        Kind.GONE: "held: gone (404/410) with many pages at once: nothing deleted",
        Kind.REWRITTEN: "held: its new text is unlike its own, as many pages' this run: records kept",
        Kind.COLLAPSED: "held: its new text is unlike its own, like other pages' (a maintenance page?): records kept",
        Kind.REDIRECTED: "held: redirected, with many pages, to one URL (a maintenance page?): nothing moved",
    }.get(state.kind, f"held: {state.kind.value}") + f" (seen on {state.seen} run(s))"


def hold_gone(
    decisions: CrawlDecisions,
    known: Mapping[str, PageRow],
    *,
    fetched_live: int,
    run: CrawlRun,
    policy: LifecyclePolicy,
) -> None:
    """The pages that answered 404/410 this run judged by the `gone` rule (`fetched_live`:
    the live pages fetched), in place: a page held keeps its row as it was."""
    rows = decisions.rows  # (a page missing `missing_after` times is no 404: it goes)
    observed = {u: Observation(Kind.GONE, "gone", "") for u in decisions.gone if rows[u].outcome == Outcome.GONE.value}
    prior = {u: known[u].quarantine if u in known else None for u in observed}
    verdict = judge(observed, prior, fetched=fetched_live, rules=policy.rules, release=run.release, now=run.now)
    decisions.taken |= verdict.taken
    decisions.released |= verdict.released
    ledger = Ledger(known, run, policy, decisions)
    for url, state in verdict.held.items():
        before = known.get(url) or replace(rows[url], state="live")  # a move's new target
        row = rows[url] = replace(before, last_fetched=rows[url].last_fetched, status_code=rows[url].status_code)
        ledger.hold(row, state, flag_for(state))
    decisions.gone = [u for u in decisions.gone if u not in verdict.held]


def settle_near_empty(
    decisions: CrawlDecisions,
    known: Mapping[str, PageRow],
    keys: Mapping[str, str],
    run: CrawlRun,
    policy: LifecyclePolicy,
) -> None:
    """Each page `decisions` held as near-empty (`keys`: url -> the text its sections would
    be cut from, hashed) judged by the `near_empty` rule, in place: confirmed or released,
    it takes its text; else it stays held with its state."""
    observed = {u: replace(decisions.near_empty[u][1], evidence=key) for u, key in keys.items()}
    prior = {u: known[u].quarantine if u in known else None for u in observed}
    verdict = judge(observed, prior, fetched=len(decisions.rows), rules=policy.rules, release=run.release, now=run.now)
    ledger = Ledger(known, run, policy, decisions)
    for url in (*verdict.taken, *verdict.released, *verdict.passed):
        ledger.take(decisions.near_empty.pop(url)[0])
    decisions.taken |= verdict.taken
    decisions.released |= verdict.released
    for url, state in verdict.held.items():
        decisions.rows[url].quarantine = state
        decisions.held[url] = state.kind


def settle_crawl(
    known: Mapping[str, PageRow],
    answers: Iterable[Answer],
    run: CrawlRun,
    policy: LifecyclePolicy,
    keys: Mapping[str, str] | None = None,
) -> CrawlDecisions:
    """The whole run after the pre-answer holds (`run.held`): every answer applied, then
    the 404s judged, then the stubs (`keys`: their near-empty keys; default their text's
    hash)."""
    answers = list(answers)
    decisions = apply_answers(known, answers, run, policy)
    fetched_live = sum(1 for a in answers if is_live(known.get(a.result.url)))
    hold_gone(decisions, known, fetched_live=fetched_live, run=run, policy=policy)
    if keys is None:
        keys = {
            u: hashlib.sha256((a.text.markdown if a.text else "").encode()).hexdigest()
            for u, (a, _) in decisions.near_empty.items()
        }
    settle_near_empty(decisions, known, keys, run, policy)
    return decisions
