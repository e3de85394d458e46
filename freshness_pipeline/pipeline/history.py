"""The metric tables read for people: the freshness history as Dagster and `freshness
status` show it, and the searches whose best match was weak (`freshness weak`)."""

from __future__ import annotations

import math
import time
from typing import Any

from ..adapters.state.store import StateStore
from ..config import Settings, state_url

HISTORY_COLUMNS = [
    "measured_at",
    "score",
    "stale_share",
    "age_median_s",
    "lag_p90_s",
    "stale_retrieval_rate",
    "hit_at_5",
    "mrr",
]


HOURS = ("age_median_s", "lag_p90_s")  # shown in hours, renamed *_h
HISTORY_SHOWN = [c.removesuffix("_s") + "_h" if c in HOURS else c for c in HISTORY_COLUMNS]  # their names as shown


def history_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metric history as people read it, in Dagster and `freshness status`: times as
    UTC minutes, ages and lags in hours (2 places), the rest rounded to 4 places."""
    out = []
    for r in rows:
        row: dict[str, Any] = {}
        for col, name in zip(HISTORY_COLUMNS, HISTORY_SHOWN, strict=True):
            v = r.get(col)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                row[name] = None
            elif col == "measured_at":
                row[name] = time.strftime("%Y-%m-%d %H:%M", time.gmtime(v))
            else:
                row[name] = round(float(v) / 3600, 2) if col in HOURS else round(float(v), 4)
        out.append(row)
    return out


def weak_searches(settings: Settings, *, days: float) -> list[dict[str, Any]]:
    """The weak searches of the last `days`, newest first, as plain JSON values: the best
    score rounded to 4 places, None when nothing matched."""
    store = StateStore(state_url(settings), read_only=True)
    try:
        rows = store.metrics.weak_queries(days=days)
    finally:
        store.close()
    return [{**r, "best_score": None if r["best_score"] is None else round(float(r["best_score"]), 4)} for r in rows]
