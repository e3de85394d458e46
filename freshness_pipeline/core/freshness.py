"""Freshness and retrieval-health arithmetic: percentiles, the composite score, golden-set
scores and miss streaks. Pure functions; the formulas are documented in docs/metrics.md."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# Exponents of the composite score's factors, see `freshness_score`.
WEIGHTS = {"stale_retrieval": 0.3, "errors": 0.15, "lag": 0.15, "age": 0.1}


def percentiles(values: Iterable[float]) -> tuple[float | None, float | None]:
    """(median, p90) with linear interpolation between closest ranks; (None, None) if empty."""
    data = [float(v) for v in values]
    if len(data) < 2:  # `quantiles` wants two points before Python 3.13
        return (data[0], data[0]) if data else (None, None)
    deciles = statistics.quantiles(data, n=10, method="inclusive")
    return deciles[4], deciles[8]


def section_age(now: float, changed_at: float, page_last_changed: float | None) -> float:
    """Seconds since a section's content last changed at its source.

    `changed_at` is when the manifest first held this content (reset by a full re-index);
    the page's `last_changed` is the last time any of its text changed. The earlier of the
    two is the better evidence: it survives re-indexes and ignores later edits elsewhere on
    the page that left this section alone.
    """
    seen = min(changed_at, page_last_changed) if page_last_changed is not None else changed_at
    return max(0.0, now - seen)


def embedding_lag(
    landed_at: float,
    seen: float | None,
    page_updated: float | None,
    *,
    first_seen: float,
    previous_run: float | None,
) -> float | None:
    """Seconds from a change to its vector landing in the index; None when nothing says when.

    The change is dated by when the pipeline first saw it: `seen` (pages.last_changed, the
    crawl that saw the change; for a page new in this run, its first fetch). The page's own
    updated date (`page_updated`) replaces it when earlier and *later than the previous
    successful run's start* (`previous_run`): the change happened while the pipeline was not
    looking and the site says when. On a source's first run (no previous run) the date never
    counts: it says when the page was written, not how late the index is. Never earlier than
    the page's `first_seen`.
    """
    start = seen
    if page_updated is not None and previous_run is not None and page_updated > previous_run:
        start = page_updated if start is None else min(start, page_updated)
    if start is None:
        return None
    start = max(start, first_seen)
    return landed_at - start if start <= landed_at else None


def factor(value: float | None, target: float) -> float:
    """1 while `value` is within `target`, then `target / value`: half at twice the target."""
    if value is None or value <= target:
        return 1.0
    return target / value


def freshness_score(
    stale_retrieval_rate: float | None,
    error_share: float,
    lag_p90_s: float | None,
    age_median_s: float | None,
    *,
    lag_target_s: float,
    age_target_s: float,
) -> float:
    """The freshness of an index as a commit left it: a weighted product of four factors in
    [0, 1] (1 is perfectly fresh):

        score = (1 - stale_retrieval_rate)^0.3 * (1 - error_share)^0.15
                * factor(lag_p90, lag_target)^0.15 * factor(age_median, age_target)^0.1

    The stale share a run found is not a factor: it is the drift the run's commit repaired,
    measured before that commit (reported beside the score, and by the `stale_share` check).
    `error_share`: live pages whose last fetch errored, was flagged or was skipped (robots.txt
    unreachable, over max_bytes, not HTML, a temporary redirect): their indexed text is
    unverified, so pages not checked lower the score like errors do. A missing figure (no
    golden set, nothing landed) counts as 1. Any factor at 0 makes the whole score 0: an
    unreachable site is not rescued by quick embedding.
    """
    parts = {
        "stale_retrieval": 1.0 - (stale_retrieval_rate or 0.0),
        "errors": 1.0 - error_share,
        "lag": factor(lag_p90_s, lag_target_s),
        "age": factor(age_median_s, age_target_s),
    }
    score = 1.0
    for name, value in parts.items():
        score *= max(0.0, min(1.0, value)) ** WEIGHTS[name]
    return score


@dataclass(frozen=True, slots=True)
class GoldenCase:
    query: str
    expect: str  # a page URL (absolute, or a path on the source's site) or a section key
    stale_prone: bool = False


@dataclass(slots=True)
class GoldenScore:
    queries: int = 0
    hit_at_1: float = 0.0
    hit_at_5: float = 0.0
    mrr: float = 0.0
    misses: list[str] = field(default_factory=list)  # queries not answered in the top 5


def score_golden(cases: Sequence[GoldenCase], ranks: Sequence[int | None], *, cutoff: int = 5) -> GoldenScore:
    """hit@1, hit@`cutoff` and MRR from the 1-based rank of each case's first right answer
    (None: not in the results). MRR counts ranks as far as the results went."""
    n = len(cases)
    if n == 0:
        return GoldenScore()
    return GoldenScore(
        queries=n,
        hit_at_1=sum(r == 1 for r in ranks) / n,
        hit_at_5=sum(r is not None and r <= cutoff for r in ranks) / n,
        mrr=sum(1.0 / r for r in ranks if r is not None) / n,
        misses=[c.query for c, r in zip(cases, ranks, strict=True) if r is None or r > cutoff],
    )


def next_streak(consecutive: int, missed: bool) -> int:
    """Consecutive misses after one more run: a hit resets the count."""
    return consecutive + 1 if missed else 0
