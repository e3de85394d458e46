"""When a source's tiers are due. Pure: last run times in, the run to launch out.

A tier is due when no refresh covering it started within its interval (`tiers.hot_every_h`,
`warm_every_h`, `cold_every_h` of the source). A run tagged with a tier covers that tier;
an untagged run (a full refresh, a backfill) covers every tier. When every tier is due
(a source never refreshed, say) one full run is launched; otherwise the most overdue tier,
one run per source at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .tiers import TIERS

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Cadence:
    """Hours between refreshes of each tier (0: due on every sensor tick)."""

    hot_every_h: float
    warm_every_h: float
    cold_every_h: float


@dataclass(frozen=True, slots=True)
class Due:
    tier: str | None  # None: a full run, every tier
    since: float  # start of the last run covering it (0.0: never); part of the run key


def intervals(policy: Cadence) -> dict[str, float]:
    hours = {"hot": policy.hot_every_h, "warm": policy.warm_every_h, "cold": policy.cold_every_h}
    return {t: h * HOUR for t, h in hours.items()}


def due(last_runs: Mapping[str | None, float], policy: Cadence, now: float) -> Due | None:
    """`last_runs`: tier (None for untagged runs) -> start time of its latest run."""
    every = intervals(policy)
    covered = {t: max(last_runs.get(t, 0.0), last_runs.get(None, 0.0)) for t in TIERS}
    overdue = {
        t: (now - covered[t]) / every[t] if every[t] > 0 else float("inf")
        for t in TIERS
        if now - covered[t] >= every[t]
    }
    if not overdue:
        return None
    if len(overdue) == len(TIERS):
        return Due(None, max(covered.values()))
    tier = max(overdue, key=lambda t: overdue[t])
    return Due(tier, covered[tier])
