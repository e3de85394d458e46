"""The metric tables read for people: the freshness history as Dagster and `freshness
status` show it, and the searches whose best match was weak (`freshness weak`)."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from ..adapters.state.store import StateStore
from ..config import Settings, state_url

if TYPE_CHECKING:
    import pandas as pd

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


def history_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`history_table` for a few rows, without pandas (`freshness status` starts without it)."""
    out = []
    for r in rows:
        row: dict[str, Any] = {}
        for col in HISTORY_COLUMNS:
            v = r.get(col)
            name = col.removesuffix("_s") + "_h" if col in HOURS else col
            if v is None or (isinstance(v, float) and math.isnan(v)):
                row[name] = None
            elif col == "measured_at":
                row[name] = time.strftime("%Y-%m-%d %H:%M", time.gmtime(v))
            else:
                row[name] = round(float(v) / 3600, 2) if col in HOURS else round(float(v), 4)
        out.append(row)
    return out


def history_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The metric history: times as UTC, ages and lags in hours."""
    import pandas as pd

    out = frame.reindex(columns=HISTORY_COLUMNS).copy()
    out["measured_at"] = pd.to_datetime(out["measured_at"], unit="s", utc=True).dt.strftime("%Y-%m-%d %H:%M")
    for col in ("age_median_s", "lag_p90_s"):
        out[col] = (out[col].astype(float) / 3600).round(2)
    return out.rename(columns={"age_median_s": "age_median_h", "lag_p90_s": "lag_p90_h"}).round(4)


def weak_searches(settings: Settings, *, days: float) -> list[dict[str, Any]]:
    """The weak searches of the last `days`, newest first, as plain JSON values: the best
    score rounded to 4 places, None when nothing matched."""
    import pandas as pd

    store = StateStore(state_url(settings), read_only=True)
    try:
        frame = store.metrics.weak_queries(days=days)
    finally:
        store.close()
    return [
        {**r, "best_score": None if pd.isna(r["best_score"]) else round(float(r["best_score"]), 4)}
        for r in frame.to_dict(orient="records")
    ]
