"""`source_fresh`: each source's freshness verdict (`core/verdict.py`), a check of
its own (a check inside a refresh cannot see a refresh that did not happen), and
`source_freshness_sensor`, which launches a run of it for a source whose verdict changed.
It launches runs rather than reporting results outside one: Dagster 1.13 keeps one runless
result per (asset, check, partition), and a partition's second one fails (docs/metrics.md)."""

import json
import time
from dataclasses import dataclass

import dagster as dg

from ..config import ConfigError
from ..pipeline.verdicts import verdicts
from .assets import vector_index
from .automation import launching_sensors_status
from .checks import SOURCE_FRESH_KEY, source_fresh_result
from .partitions import SOURCES, sources_partitions
from .resources import FreshnessResource


class KnownSince(dg.Config):
    """When source_freshness_sensor first saw the source (epoch seconds): a source never
    refreshed is late from then. Passed in the check run's config, not read from its tags."""

    known_since: float | None = None


@dg.asset_check(
    asset=vector_index,
    name=SOURCE_FRESH_KEY.name,
    partitions_def=sources_partitions,
    description="The source's freshness verdict (fresh, stale, never, blocked or failed), as `freshness "
    "status` says it: its last committed refresh against its own cadence (`tiers.*_every_h`), WARN once "
    "its fastest tier's interval passed without one, ERROR once its slowest tier's did (for a source "
    "never refreshed, counted from when source_freshness_sensor first saw it); WARN after a blocked or "
    "failed attempt; WARN under `checks.freshness_alert`. Judged when it runs: "
    "source_freshness_sensor runs it for a source whose verdict changed.",
)
def source_fresh(
    context: dg.AssetCheckExecutionContext, config: KnownSince, freshness: FreshnessResource
) -> dg.AssetCheckResult:
    settings = freshness.settings()
    name = context.partition_key
    try:
        source = settings.source(name)
    except ConfigError as exc:
        raise dg.Failure(description=f"source_fresh: {exc}", allow_retries=False) from exc
    seen = None if config.known_since is None else {name: config.known_since}
    return source_fresh_result(verdicts(settings, [source.name], known_since=seen)[source.name])


@dg.sensor(
    asset_selection=dg.AssetSelection.checks(source_fresh),
    minimum_interval_seconds=60,
    default_status=launching_sensors_status(),
    description="Has each source's source_fresh check judged between runs (each source against its "
    "own cadence): when a source's verdict (fresh, stale, never, blocked, failed) or its level "
    "changes, a source_freshness run reports it.",
)
def source_freshness_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    settings = freshness.settings()
    known = set(context.instance.get_dynamic_partitions(SOURCES))  # sources_partitions_sensor adds them
    now = time.time()
    cursor = _Cursor.load(context.cursor)
    names = [s.name for s in settings.sources if s.name in known]
    seen = {name: cursor.seen.get(name, now) for name in names}  # a source is late from when it is known
    found = {name: f"{v.state} {v.level}" for name, v in verdicts(settings, names, known_since=seen, now=now).items()}
    changed = sorted(name for name, state in found.items() if cursor.states.get(name) != state)
    saved = json.dumps({"states": found, "seen": seen}, sort_keys=True)
    if not changed:
        return dg.SensorResult(skip_reason="no source's freshness changed", cursor=saved)
    context.log.info("; ".join(f"{name}: {cursor.states.get(name, 'unreported')} -> {found[name]}" for name in changed))
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                partition_key=name,
                asset_check_keys=[SOURCE_FRESH_KEY],
                run_config={"ops": {source_fresh.node_def.name: {"config": {"known_since": seen[name]}}}},
            )
            for name in changed
        ],
        cursor=saved,
    )


@dataclass(frozen=True, slots=True)
class _Cursor:
    """What the sensor reported per source ("<state> <level>") and when it first saw each."""

    states: dict[str, str]
    seen: dict[str, float]

    @classmethod
    def load(cls, cursor: str | None) -> "_Cursor":
        data = json.loads(cursor or "{}")
        if "states" not in data:  # a cursor of source -> state only
            return cls({}, {})
        return cls(data["states"], {k: float(v) for k, v in data["seen"].items()})
