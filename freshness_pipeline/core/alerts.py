"""Why a freshness score is under its alert threshold, in words: each factor of the
composite score that is below 1 (see `freshness_score`), the costliest first."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .freshness import WEIGHTS, factor

_HOUR, _DAY = 3600.0, 86_400.0


def alert_reasons(row: Mapping[str, Any], *, lag_target_s: float, age_target_s: float) -> list[str]:
    """One phrase per factor that lowered the score of a stored measurement `row` (a
    `freshness_metrics` row: stale_retrieval_rate, error_share, lag_p90_s, age_median_s), the
    one that cost the most first."""
    srr = row.get("stale_retrieval_rate") or 0.0
    errors = row.get("error_share") or 0.0
    lag, age = row.get("lag_p90_s"), row.get("age_median_s")
    found: list[tuple[float, str]] = []

    def add(name: str, value: float, why: str) -> None:
        if value < 1.0:
            found.append((WEIGHTS[name] * math.log(max(value, 1e-9)), why))

    add("stale_retrieval", 1.0 - srr, f"stale retrieval rate {srr:.1%}: golden-set queries answered by a stale record")
    add("errors", 1.0 - errors, f"fetch error share {errors:.1%}: live pages whose last fetch failed or was flagged")
    add(
        "lag",
        factor(lag, lag_target_s),
        f"embedding lag p90 {(lag or 0) / _HOUR:.1f}h, over checks.lag_target_h {lag_target_s / _HOUR:g}h",
    )
    add(
        "age",
        factor(age, age_target_s),
        f"median content age {(age or 0) / _DAY:.0f}d, over checks.age_target_d {age_target_s / _DAY:g}d",
    )
    return [why for _, why in sorted(found, key=lambda f: f[0])]
