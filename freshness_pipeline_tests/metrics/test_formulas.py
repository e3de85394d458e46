"""The metric formulas against examples worked by hand (docs/metrics.md)."""

from __future__ import annotations

import pytest

from freshness_pipeline.core.freshness import (
    GoldenCase,
    embedding_lag,
    factor,
    freshness_score,
    next_streak,
    percentiles,
    score_golden,
    section_age,
)

H = 3600.0


def test_percentiles_interpolate_between_ranks() -> None:
    # Sorted 1..10: the median sits between 5 and 6; p90 at rank 0.9 * 9 = 8.1 -> 9 + 0.1 * 1.
    assert percentiles(range(10, 0, -1)) == pytest.approx((5.5, 9.1))
    assert percentiles([7.0]) == (7.0, 7.0)
    assert percentiles([]) == (None, None)


def test_content_age_takes_the_earliest_evidence_of_the_last_change() -> None:
    now = 100 * H
    # Indexed at 90h but the page last changed at 40h (a re-index reset changed_at): 60h old.
    assert section_age(now, changed_at=90 * H, page_last_changed=40 * H) == 60 * H
    # Another section of the page changed later (70h); this one has not since 20h: 80h old.
    assert section_age(now, changed_at=20 * H, page_last_changed=70 * H) == 80 * H
    assert section_age(now, changed_at=30 * H, page_last_changed=None) == 70 * H
    ages = [section_age(now, c, p) for c, p in [(90 * H, 40 * H), (20 * H, 70 * H), (30 * H, None), (95 * H, 99 * H)]]
    # 60, 80, 70, 5 hours -> sorted 5, 60, 70, 80: median 65, p90 = 70 + 0.7 * 10 = 77.
    assert percentiles(ages) == pytest.approx((65 * H, 77 * H))


def test_embedding_lag_from_first_sight_or_the_pages_own_date() -> None:
    def lag(seen: float | None, updated: float | None, *, first_seen: float = 0.0, previous: float | None = 6 * H):
        return embedding_lag(12 * H, seen, updated, first_seen=first_seen, previous_run=previous)

    # Previous run started at 6h; this one saw the change at 10h, landed it at 12h: 2h.
    assert lag(10 * H, None) == 2 * H
    # The page says it was updated by 8h (end of its day), after the previous run began:
    # the change happened while we were not looking, so the lag counts from 8h: 4h.
    assert lag(10 * H, 8 * H) == 4 * H
    # A date before the previous run began says nothing more (that run would have seen it).
    assert lag(10 * H, 4 * H) == 2 * H
    # A date later than the sighting (the end of today) says nothing either.
    assert lag(10 * H, 24 * H) == 2 * H
    # Never earlier than the page's first fetch: first seen at 9h, dated 8h -> 3h.
    assert lag(10 * H, 8 * H, first_seen=9 * H) == 3 * H
    # A source's first run: no previous run, so a page published long ago (its date 1h)
    # lags from its first fetch (10h), not from its publication: 2h, not 11h.
    assert lag(10 * H, 1 * H, first_seen=10 * H, previous=None) == 2 * H
    assert lag(None, None) is None
    assert lag(None, 8 * H) == 4 * H  # no sighting recorded, but a date after the last run


def test_factor_is_one_within_target_then_target_over_value() -> None:
    assert factor(None, 10) == 1.0
    assert factor(10, 10) == 1.0
    assert factor(40, 10) == 0.25


def test_composite_score_worked_examples() -> None:
    day = 24 * H
    kw = {"lag_target_s": day, "age_target_s": 730 * day}
    assert freshness_score(None, 0.0, None, None, **kw) == 1.0
    # 0.8^0.3 * 1^0.15 * (24/48)^0.15 * 1 = 0.93524 * 0.90125 = 0.84289
    assert freshness_score(0.2, 0.0, 2 * day, 100 * day, **kw) == pytest.approx(0.84289, abs=1e-5)
    # Only the age is off: 4x the target -> 0.25^0.1 = 0.87055.
    assert freshness_score(0.0, 0.0, 0.0, 4 * 730 * day, **kw) == pytest.approx(0.87055, abs=1e-5)
    # A fifth of the live pages failing their last fetch: 0.8^0.15 = 0.96708 (under 0.95
    # only past 29%).
    assert freshness_score(None, 0.2, None, None, **kw) == pytest.approx(0.96708, abs=1e-5)
    # A site whose every page errors, or whose golden answers are all stale, scores 0.
    assert freshness_score(None, 1.0, None, None, **kw) == 0.0
    assert freshness_score(1.0, 0.0, 0.0, 0.0, **kw) == 0.0


def test_golden_scores_from_ranks() -> None:
    cases = [GoldenCase(q, "/x") for q in ("a", "b", "c", "d")]
    s = score_golden(cases, [1, 3, None, 7], cutoff=5)
    assert (s.queries, s.hit_at_1, s.hit_at_5) == (4, 0.25, 0.5)
    # MRR = (1 + 1/3 + 0 + 1/7) / 4 = 0.36905
    assert s.mrr == pytest.approx((1 + 1 / 3 + 1 / 7) / 4)
    assert s.misses == ["c", "d"]


def test_miss_streaks_reset_on_a_hit() -> None:
    streak = 0
    for missed in (True, True, False, True, True, True):
        streak = next_streak(streak, missed)
    assert streak == 3
