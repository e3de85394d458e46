"""The outage holds: a minute of a broken site is not news about each page. Pure: no I/O.

Many pages of one run (more than a share of the pages fetched *and* at least
`min_outage_pages`) turning into text unlike their own last text (`hold_mass_rewrites`: a
maintenance page served with 200, varying per URL or not) or into 404/410
(`hold_mass_gone`) is an outage signature: those pages are held as errors with their
records and text, flagged, and their answer remembered (`PageRow.pending`); the next run
takes it when its fresh fetch sees the same (the `missing_after` idea, for content), or
the operator's override takes it at once. Many pages redirecting to one URL are held
every time (`hold_mass_redirects`). Each compares with the pages fetched in *this* run,
so a tier run is judged on its own.

The shell (`pipeline/crawl.py`) passes the fetch results through `hold_mass_redirects`
and `hold_mass_rewrites` before its `Ledger` records them, and the decisions through
`hold_mass_gone`. `settle_crawl` is `lifecycle.apply_answers` and the mass-gone hold in
one call (the tests use it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from .lifecycle import Answer, CrawlDecisions, CrawlRun, LifecyclePolicy, apply_answers, is_live
from .models import FetchResult, Outcome
from .state import PageRow

__all__ = ["GONE", "Held", "Turn", "hold_mass_gone", "hold_mass_redirects", "hold_mass_rewrites", "settle_crawl"]


GONE = "gone"  # `PageRow.pending` of a page held as part of a mass 404/410


@dataclass(frozen=True, slots=True)
class Turn:
    """A page whose new extract differs from its stored text (or that had none)."""

    shape: str  # `text_shape` of the new text: what pages serving one error page share
    text_hash: str  # sha256 of the new text
    unlike: bool  # unlike the page's own last text (`responses.resemblance` under its floor)


@dataclass(frozen=True, slots=True)
class Held:
    """The pages a hold kept as they were, what each was held for, and the run's one line on it."""

    pending: Mapping[str, str] = field(default_factory=dict)  # URL -> text hash, or "gone"
    message: str | None = None


def settle_crawl(
    known: Mapping[str, PageRow],
    answers: Iterable[Answer],
    run: CrawlRun,
    policy: LifecyclePolicy,
    *,
    allow_mass_gone: bool = False,
) -> CrawlDecisions:
    """The whole run: every answer applied, then the mass-gone hold (`allow_mass_gone`:
    the operator's override). Give it answers `hold_mass_redirects` already passed."""
    answers = list(answers)
    decisions = apply_answers(known, answers, run, policy)
    fetched_live = sum(1 for a in answers if is_live(known.get(a.result.url)))
    return hold_mass_gone(decisions, known, fetched_live=fetched_live, policy=policy, allow=allow_mass_gone)[0]


def hold_mass_redirects(results: list[FetchResult], policy: LifecyclePolicy) -> list[FetchResult]:
    """`results` with every page that redirected to an over-shared target turned into an
    ERROR that says why (its last text is kept, nothing moves)."""
    fetched = len(results)
    targets = Counter(r.final_url for r in results if r.final_url and r.outcome is not Outcome.ERROR)
    limit = policy.max_redirect_share
    held = {t: n for t, n in targets.items() if n >= 2 and n > limit * fetched}
    if not held:
        return results
    return _held_as_errors(
        results,
        lambda r: held.get(r.final_url or "") if r.outcome is not Outcome.ERROR else None,
        lambda r, n: (
            f"held: {n} of {fetched} pages fetched this run redirect to {r.final_url} (over "
            f"fetch.max_redirect_share {limit:.0%}); treated as an outage (a maintenance page?), "
            "nothing moved or changed, fetched again next run"
        ),
    )


def _outage(n: int, of: int, share: float, policy: LifecyclePolicy) -> bool:
    return n >= policy.min_outage_pages and n > share * of


def hold_mass_rewrites(
    results: list[FetchResult],
    turned: Mapping[str, Turn],
    known: Mapping[str, PageRow],
    policy: LifecyclePolicy,
    *,
    allow: bool = False,
) -> tuple[list[FetchResult], Held]:
    """`results`, or when more than `max_rewritten_share` of them (and `min_outage_pages`)
    are live pages turning into text unlike their own last text, a copy where each of
    those is an ERROR that says why (its last text is kept), with any new page showing the
    same text as one of them. A page whose new text is what it was held for last run is
    confirmed: taken, not counted. `allow`: the operator's override takes them all."""
    fetched, limit = len(results), policy.max_rewritten_share
    suspects = {
        url
        for url, t in turned.items()
        if t.unlike and (k := known.get(url)) is not None and k.text_hash is not None and k.pending != t.text_hash
    }
    if allow or not _outage(len(suspects), fetched, limit, policy):
        return results, Held()
    shapes = {turned[u].shape for u in suspects}
    held = suspects | {
        u for u, t in turned.items() if t.shape in shapes and ((k := known.get(u)) is None or k.text_hash is None)
    }
    why = (
        f"held: {len(suspects)} of {fetched} pages fetched this run turned into text unlike their own (over "
        f"fetch.max_rewritten_share {limit:.0%}); an outage signature (a maintenance page?): its last text and "
        "records kept, the new text taken if the next run sees it again"
    )
    out = _held_as_errors(results, lambda r: 1 if r.url in held and r.outcome is Outcome.OK else None, lambda r, n: why)
    return out, Held({u: turned[u].text_hash for u in held}, why)


def _held_as_errors(
    results: list[FetchResult],
    share_of: Callable[[FetchResult], int | None],
    why: Callable[[FetchResult, int], str],
) -> list[FetchResult]:
    """`results` with each one that `share_of` counts in an over-shared group turned into an
    ERROR saying `why` (an error keeps the page's last text)."""
    out = []
    for r in results:
        if n := share_of(r):
            r = FetchResult(r.url, Outcome.ERROR, status_code=r.status_code, reason=why(r, n), fetched_at=r.fetched_at)
        out.append(r)
    return out


def hold_mass_gone(
    decisions: CrawlDecisions,
    known: Mapping[str, PageRow],
    *,
    fetched_live: int,
    policy: LifecyclePolicy,
    allow: bool,
) -> tuple[CrawlDecisions, Held]:
    """`decisions`, or when more than `max_gone_share` of the `fetched_live` live pages this
    run fetched (and `min_outage_pages`) would go, a copy where none of them goes: each is
    an error, its row as it was, flagged and pending "gone". A page held so last run and
    gone again is confirmed: it goes, and is not counted."""
    limit = policy.max_gone_share
    rows = decisions.rows  # 404/410 this run counts (a page missing `missing_after` times is confirmed)
    gone_now = [u for u in decisions.gone if rows[u].outcome == Outcome.GONE.value]
    suspects = [u for u in gone_now if (k := known.get(u)) is None or k.pending != GONE]
    if allow or not _outage(len(suspects), fetched_live, limit, policy):
        return decisions, Held()
    why = (
        f"held: {len(suspects)} of {fetched_live} live pages would be gone in one crawl (of those fetched, over "
        f"fetch.max_gone_share {limit:.0%}); an outage signature: nothing deleted, gone if the next run sees them "
        "gone again. If the site really lost them, re-run with the spike override (freshness run --allow-spike)"
    )
    rows, errors, flagged = dict(decisions.rows), dict(decisions.errors), dict(decisions.flagged)
    for url in suspects:
        before = known.get(url) or replace(rows[url], state="live")  # a move's new target
        rows[url] = replace(
            before,
            outcome=Outcome.ERROR.value,
            reason=why,
            last_fetched=rows[url].last_fetched,
            flag=why,
            pending=GONE,
        )
        errors[url] = flagged[url] = why
    held = set(suspects)
    gone = [u for u in decisions.gone if u not in held]
    return replace(decisions, rows=rows, errors=errors, flagged=flagged, gone=gone), Held(
        dict.fromkeys(suspects, GONE), why
    )
