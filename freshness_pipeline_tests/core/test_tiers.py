"""Tier promotion and demotion (`core/tiers.py`): the thresholds are written out here as
numbers (2 changes in 14 days: hot; 30 quiet days: cold), so changing one breaks a test."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from freshness_pipeline.core.tiers import tier_for

DAY = 86_400.0
NOW = 1_000 * DAY
NO_RULES = SimpleNamespace(rules=(), default="warm")  # every page starts warm


def tier(changes_days_ago: list[float], known_days: float = 365) -> str:
    return tier_for(
        "https://docs.test/a",
        NO_RULES,  # type: ignore[arg-type]
        change_times=[NOW - d * DAY for d in changes_days_ago],
        first_seen=NOW - known_days * DAY,
        now=NOW,
    )


@pytest.mark.parametrize(
    ("changes", "want"),
    [
        ([1, 3], "hot"),  # two changes in the last 14 days
        ([0, 14], "hot"),  # the window includes its 14th day
        ([1], "warm"),  # one change is not a pattern
        ([1, 14.01], "warm"),  # the second fell out of the window
        ([1, 2, 40], "hot"),
        ([20, 25], "warm"),  # changed twice, but not lately; not quiet for 30 days either
    ],
)
def test_promotion_needs_two_changes_within_fourteen_days(changes: list[float], want: str) -> None:
    assert tier(changes) == want


@pytest.mark.parametrize(
    ("changes", "known_days", "want"),
    [
        ([30], 365, "cold"),  # 30 quiet days
        ([29.9], 365, "warm"),
        ([], 30, "cold"),  # never changed since it was first seen, 30 days ago
        ([], 29.9, "warm"),  # a new page is not cold yet, however quiet
        ([31, 200], 365, "cold"),
    ],
)
def test_demotion_needs_thirty_quiet_days_and_a_page_known_that_long(
    changes: list[float], known_days: float, want: str
) -> None:
    assert tier(changes, known_days) == want


def test_a_page_that_turns_busy_again_is_promoted_from_cold() -> None:
    assert tier([60]) == "cold"
    assert tier([0, 5, 60]) == "hot"
    assert tier([0, 60]) == "warm"  # one change ends the quiet, not yet hot
