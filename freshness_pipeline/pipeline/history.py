"""The metric tables read for people: the freshness history as Dagster and `freshness
status` show it, and the searches whose best match was weak (`freshness weak`)."""

from __future__ import annotations

import math
from typing import Any

from ..adapters.state.store import StateStore
from ..config import Settings, state_url
from ..core.tables import HISTORY, utc_minute

# The table's columns (core/tables.py HISTORY) and the state store's behind them: ages and
# lags are stored in seconds, shown in hours.
HOURS = {"age_median_h": "age_median_s", "lag_p90_h": "lag_p90_s"}
HISTORY_COLUMNS = [HOURS.get(c, c) for c in HISTORY.names]


def history_values(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metric history in the table's columns: ages and lags in hours (2 places), the
    rest rounded to 4 places, `measured_at` in POSIX seconds, NaN as None (the error share
    is None for a measurement made before it was kept)."""
    out = []
    for r in rows:
        row: dict[str, Any] = {}
        for col, name in zip(HISTORY_COLUMNS, HISTORY.names, strict=True):
            v = r.get(col) if col != "error_share" else (r.get("details") or {}).get(col)  # kept in its details
            if v is None or (isinstance(v, float) and math.isnan(v)):
                row[name] = None
            elif col == "run_id":
                row[name] = str(v)
            elif col == "measured_at":
                row[name] = float(v)
            else:
                row[name] = round(float(v) / 3600, 2) if name in HOURS else round(float(v), 4)
        out.append(row)
    return out


def history_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metric history as people read it, in `freshness status`: `history_values` with
    times as UTC minutes and run ids cut to their first 8 characters, as Dagster shows them."""
    return [
        {**r, "run_id": r["run_id"] and r["run_id"][:8], "measured_at": utc_minute(r["measured_at"])}
        for r in history_values(rows)
    ]


def weak_searches(settings: Settings, *, days: float) -> list[dict[str, Any]]:
    """The weak searches of the last `days`, newest first, as plain JSON values: the best
    score rounded to 4 places, None when nothing matched."""
    store = StateStore(state_url(settings), read_only=True)
    try:
        rows = store.metrics.weak_queries(days=days)
    finally:
        store.close()
    return [{**r, "best_score": None if r["best_score"] is None else round(float(r["best_score"]), 4)} for r in rows]
