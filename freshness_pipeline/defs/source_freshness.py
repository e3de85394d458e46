"""`source_fresh`: each source's last committed refresh against its own cadence, a check of
its own (a check inside a refresh cannot see a refresh that did not happen), and
`source_freshness_sensor`, which launches a run of it for a source whose verdict changed.
It launches runs rather than reporting results outside one: Dagster 1.13 keeps one runless
result per (asset, check, partition), and a partition's second one fails (docs/metrics.md)."""

import json
import time
from contextlib import closing

import dagster as dg

from ..adapters.state.store import StateStore
from ..config import ConfigError, Settings, state_url
from .assets import vector_index
from .automation import launching_sensors_status
from .checks import SOURCE_FRESH_KEY, source_fresh_verdict
from .partitions import SOURCES, sources_partitions
from .resources import FreshnessResource


def last_refreshes(settings: Settings, names: list[str] | None = None) -> dict[str, float | None]:
    """Source -> when its last committed refresh finished (None: never)."""
    out: dict[str, float | None] = {}
    with closing(StateStore(state_url(settings), read_only=True)) as store:
        for name in [s.name for s in settings.sources] if names is None else names:
            runs = store.runs.recent(name, limit=1)
            out[name] = float(runs[0]["finished_at"]) if runs else None
    return out


@dg.asset_check(
    asset=vector_index,
    name=SOURCE_FRESH_KEY.name,
    partitions_def=sources_partitions,
    description="The source's last committed refresh against its own cadence (`tiers.*_every_h`): "
    "WARN once its fastest tier's interval passed without one, ERROR once its slowest tier's did. "
    "Judged when it runs: source_freshness_sensor runs it for a source whose verdict changed.",
)
def source_fresh(context: dg.AssetCheckExecutionContext, freshness: FreshnessResource) -> dg.AssetCheckResult:
    settings = freshness.settings()
    name = context.partition_key
    try:
        source = settings.source(name)
    except ConfigError as exc:
        raise dg.Failure(description=f"source_fresh: {exc}", allow_retries=False) from exc
    passed, severity, description, metadata = source_fresh_verdict(source, last_refreshes(settings, [name])[name])
    return dg.AssetCheckResult(passed=passed, severity=severity, description=description, metadata=metadata)


@dg.sensor(
    asset_selection=dg.AssetSelection.checks(source_fresh),
    minimum_interval_seconds=60,
    default_status=launching_sensors_status(),
    description="Has each source's source_fresh check judged between runs: WARN once its fastest "
    "tier's interval passed since its last committed refresh, ERROR once its slowest tier's did "
    "(each source against its own cadence). When a source's verdict changes, a source_freshness "
    "run reports it.",
)
def source_freshness_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    settings = freshness.settings()
    known = set(context.instance.get_dynamic_partitions(SOURCES))  # sources_partitions_sensor adds them
    last, now = last_refreshes(settings), time.time()
    found = {}  # each source's state: "pass", "WARN" or "ERROR"
    for src in (s for s in settings.sources if s.name in known):
        passed, severity, _, _ = source_fresh_verdict(src, last[src.name], now)
        found[src.name] = "pass" if passed else severity.value
    reported: dict[str, str] = json.loads(context.cursor or "{}")
    changed = sorted(name for name, state in found.items() if reported.get(name) != state)
    cursor = json.dumps(found, sort_keys=True)
    if not changed:
        return dg.SensorResult(skip_reason="no source's freshness changed", cursor=cursor)
    context.log.info("; ".join(f"{name}: {reported.get(name, 'unreported')} -> {found[name]}" for name in changed))
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=name, asset_check_keys=[SOURCE_FRESH_KEY]) for name in changed],
        cursor=cursor,
    )
