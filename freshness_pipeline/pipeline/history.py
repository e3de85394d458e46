"""The metric tables read for people: the freshness history as Dagster and `freshness
status` show it, and the searches whose best match was weak (`freshness weak`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

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


def history_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The metric history: times as UTC, ages and lags in hours."""
    out = frame.reindex(columns=HISTORY_COLUMNS).copy()
    out["measured_at"] = pd.to_datetime(out["measured_at"], unit="s", utc=True).dt.strftime("%Y-%m-%d %H:%M")
    for col in ("age_median_s", "lag_p90_s"):
        out[col] = (out[col].astype(float) / 3600).round(2)
    return out.rename(columns={"age_median_s": "age_median_h", "lag_p90_s": "lag_p90_h"}).round(4)


def weak_searches(settings: Settings, *, days: float) -> list[dict[str, Any]]:
    """The weak searches of the last `days`, newest first, as plain JSON values: the best
    score rounded to 4 places, None when nothing matched."""
    store = StateStore(state_url(settings), read_only=True)
    try:
        frame = store.metrics.weak_queries(days=days)
    finally:
        store.close()
    return [
        {**r, "best_score": None if pd.isna(r["best_score"]) else round(float(r["best_score"]), 4)}
        for r in frame.to_dict(orient="records")
    ]
