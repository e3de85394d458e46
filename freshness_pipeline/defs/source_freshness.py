"""`source_freshness_sensor`: judges every source's freshness between runs.

A check that runs only inside a refresh cannot see a refresh that did not happen (a site
unreachable, a spike blocked, the sensors off), so this sensor reports the `source_fresh`
check of each source's partition itself, from the state store's committed runs, whenever
its verdict changes. Dagster's `FreshnessPolicy` would judge `vector_index` as a whole:
one source refreshed would make every other one look fresh.
"""

from __future__ import annotations

import json
import time

import dagster as dg

from ..adapters.state.store import StateStore
from ..config import Settings, state_url
from .assets import vector_index
from .checks import SOURCE_FRESH, source_fresh_verdict
from .partitions import sources_partitions
from .resources import FreshnessResource


def last_refreshes(settings: Settings) -> dict[str, float | None]:
    """Source -> when its last committed refresh finished (None: never)."""
    store = StateStore(state_url(settings), read_only=True)
    try:
        out: dict[str, float | None] = {}
        for src in settings.sources:
            runs = store.runs.recent(src.name, limit=1)
            out[src.name] = float(runs[0]["finished_at"]) if runs else None
        return out
    finally:
        store.close()


def evaluations(
    settings: Settings, last: dict[str, float | None], now: float, known: set[str]
) -> dict[str, dg.AssetCheckEvaluation]:
    """The `source_fresh` evaluation of each source that has its partition."""
    out = {}
    for src in settings.sources:
        if src.name not in known:
            continue  # sources_partitions_sensor adds it first
        passed, severity, description, metadata = source_fresh_verdict(src, last.get(src.name), now)
        out[src.name] = dg.AssetCheckEvaluation(
            asset_key=vector_index.key,
            check_name=SOURCE_FRESH.name,
            passed=passed,
            severity=severity,
            description=description,
            metadata=metadata,
            partition=src.name,
        )
    return out


def _state(e: dg.AssetCheckEvaluation) -> str:
    return "pass" if e.passed else e.severity.value


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Reports each source's source_fresh check between runs: WARN once its fastest "
    "tier's interval passed since its last committed refresh, ERROR once its slowest tier's did "
    "(each source against its own cadence). Reported when a verdict changes.",
)
def source_freshness_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    settings = freshness.settings()
    partitions = sources_partitions.name
    assert partitions is not None  # partitions.py names it
    known = set(context.instance.get_dynamic_partitions(partitions))
    found = evaluations(settings, last_refreshes(settings), time.time(), known)
    reported: dict[str, str] = json.loads(context.cursor or "{}")
    changed = [e for name, e in found.items() if reported.get(name) != _state(e)]
    cursor = json.dumps({name: _state(e) for name, e in found.items()}, sort_keys=True)
    if not changed:
        return dg.SensorResult(skip_reason="no source's freshness changed", cursor=cursor)
    context.log.info("; ".join(e.description or "" for e in changed))
    return dg.SensorResult(asset_events=changed, cursor=cursor)
