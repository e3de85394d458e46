"""Which cadence a page is refreshed on: hot, warm or cold. Pure.

A page starts on the tier its source's URL rules give (or the default). Its observed
history then moves it: a page whose text changed at least `PROMOTE_CHANGES` times in the
last `PROMOTE_WINDOW_DAYS` is hot; one that has not changed for `DEMOTE_QUIET_DAYS`
(and has been known that long) is cold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

DAY = 86_400.0
PROMOTE_CHANGES = 2
PROMOTE_WINDOW_DAYS = 14
DEMOTE_QUIET_DAYS = 30
TIERS = ("hot", "warm", "cold")


@dataclass(frozen=True, slots=True)
class TierRules:
    """A source's URL rules: the first (regex, tier) whose regex matches a URL gives its
    tier, else `default` (`tiers.rules` and `tiers.default` of the sources file)."""

    rules: tuple[tuple[str, str], ...]
    default: str


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def base_tier(url: str, policy: TierRules) -> str:
    for pattern, tier in policy.rules:
        if _compiled(pattern).search(url):
            return tier
    return policy.default


def tier_for(
    url: str,
    policy: TierRules,
    *,
    change_times: Sequence[float],
    first_seen: float,
    now: float,
) -> str:
    recent = [t for t in change_times if now - t <= PROMOTE_WINDOW_DAYS * DAY]
    if len(recent) >= PROMOTE_CHANGES:
        return "hot"
    last_change = max(change_times, default=first_seen)
    if now - first_seen >= DEMOTE_QUIET_DAYS * DAY and now - last_change >= DEMOTE_QUIET_DAYS * DAY:
        return "cold"
    return base_tier(url, policy)
