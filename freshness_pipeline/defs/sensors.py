"""The sensors that operate the pipeline:

- `sources_partitions_sensor`: one `sources` partition per source in the sources file. A
  source removed from the file keeps its partition, history and index; it is just no
  longer scheduled.
- `tier_cadence_sensor`: launches `refresh` runs tagged `freshness/tier` when a tier is due
  (see `cadence.py`), reading the last runs from the instance's run records. Only a
  successful refresh covers its tier: a failed or canceled one is retried on the next tick
  (under a new run key); one queued or in flight blocks another launch for the source.
- `version_bump_sensor`: when the versions a refresh would build with now (normalizer,
  chunker, embedding model) differ from those a source's index was built with, requests
  one backfill of the four assets over those sources' partitions.

A sources file that does not load fails the tick (its ConfigError names the file and the
setting): a broken file must not pass for "nothing to do".
"""

import json
import time
from dataclasses import dataclass, field

import dagster as dg
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.events import AssetKeyPartitionKey

from ..adapters.state.store import StateStore
from ..config import Settings, state_url
from ..core.cadence import due
from ..core.tiers import TIERS
from ..pipeline.context import versions_for
from .assets import TIER_TAG, fetched_pages, refresh_job, refresh_selection
from .partitions import sources_partitions
from .resources import FreshnessResource

PARTITION_TAG = "dagster/partition"
REINDEX_TAG = "freshness/reindex"
RUN_LOOKBACK = 100  # recent runs per source searched for untagged runs and runs in flight


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def sources_partitions_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    names = [s.name for s in freshness.settings().sources]
    known = set(context.instance.get_dynamic_partitions(sources_partitions.name))
    new = [n for n in names if n not in known]
    retired = sorted(known - set(names))
    if retired:
        context.log.info(f"not in the sources file, kept but not scheduled: {', '.join(retired)}")
    if not new:
        return dg.SkipReason("every source has its partition")
    return dg.SensorResult(dynamic_partitions_requests=[sources_partitions.build_add_request(new)])


def _is_refresh(run: dg.DagsterRun) -> bool:
    return run.job_name == refresh_job.name or fetched_pages.key in (run.asset_selection or ())


@dataclass(slots=True)
class _Runs:
    """A source's recent refreshes, as the tier sensor sees them."""

    last: dict[str | None, float] = field(default_factory=dict)  # tier (None: untagged) -> latest success
    failed: list[float] = field(default_factory=list)  # start times of failed or canceled refreshes
    busy: bool = False  # one is queued or in flight

    def attempt(self, since: float) -> str:
        """Run key suffix: a refresh that failed after `since` is retried under a new key."""
        n = sum(t > since for t in self.failed)
        return f":retry{n}" if n else ""


def _last_runs(instance: dg.DagsterInstance, source: str) -> _Runs:
    """Only a successful refresh covers its tier: a failed or canceled one is retried."""
    out = _Runs()
    success = [dg.DagsterRunStatus.SUCCESS]
    queries = [(dg.RunsFilter(tags={PARTITION_TAG: source}), RUN_LOOKBACK)] + [
        (dg.RunsFilter(tags={PARTITION_TAG: source, TIER_TAG: t}, statuses=success), 1) for t in TIERS
    ]
    seen: set[str] = set()
    for runs_filter, limit in queries:
        for r in instance.get_run_records(runs_filter, limit=limit):
            run = r.dagster_run
            if run.run_id in seen or not _is_refresh(run):
                continue
            seen.add(run.run_id)
            started = r.create_timestamp.timestamp()
            if not run.is_finished:
                out.busy = True
            elif run.status is dg.DagsterRunStatus.SUCCESS:
                tier = run.tags.get(TIER_TAG)
                out.last[tier] = max(out.last.get(tier, 0.0), started)
            else:
                out.failed.append(started)
    return out


@dg.sensor(job=refresh_job, minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING)
def tier_cadence_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    settings = freshness.settings()
    now = time.time()
    requests = []
    for src in settings.sources:
        if not context.instance.has_dynamic_partition(sources_partitions.name, src.name):
            continue  # sources_partitions_sensor adds it first
        runs = _last_runs(context.instance, src.name)
        next_up = None if runs.busy else due(runs.last, src.tiers, now)
        if next_up is None:
            continue
        tier = next_up.tier
        requests.append(
            dg.RunRequest(
                run_key=f"{src.name}:{tier or 'all'}:{next_up.since:.0f}{runs.attempt(next_up.since)}",
                partition_key=src.name,
                tags={TIER_TAG: tier} if tier else {},
            )
        )
    return dg.SensorResult(run_requests=requests) if requests else dg.SkipReason("no tier is due")


def _version_drift(settings: Settings) -> dict[str, str]:
    """Source -> what differs between its active index and what a refresh would build now."""
    store = StateStore(state_url(settings))
    try:
        out = {}
        for src in settings.sources:
            state = store.source_state(src.name)
            if state is not None and state.generation > 0:
                if diffs := versions_for(settings, src).differences(state):
                    out[src.name] = "; ".join(diffs)
        return out
    finally:
        store.close()


def reindex_request(context: dg.SensorEvaluationContext, drift: dict[str, str]) -> dg.RunRequest:
    """One backfill of the refresh assets over the drifted sources' partitions.

    Dagster 1.13 has no public constructor for a backfill request from a sensor; the sensor
    daemon launches a backfill for a RunRequest carrying an asset graph subset (the channel
    its own automation sensors use), so this builds exactly that.
    """
    graph = context.repository_def.asset_graph
    keys = {
        AssetKeyPartitionKey(key, source)
        for key in refresh_selection.resolve(graph)
        if graph.get(key).partitions_def == sources_partitions
        for source in drift
    }
    subset = AssetGraphSubset.from_asset_partition_set(keys, graph)
    reason = " | ".join(f"{s}: {d}" for s, d in sorted(drift.items()))
    return dg.RunRequest.for_asset_graph_subset(subset, tags={REINDEX_TAG: reason[:4000]})


@dg.sensor(
    asset_selection=refresh_selection,
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def version_bump_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    settings = freshness.settings()
    requested: dict[str, str] = json.loads(context.cursor or "{}")
    drift = {
        s: d
        for s, d in _version_drift(settings).items()
        if context.instance.has_dynamic_partition(sources_partitions.name, s)
    }
    todo = {s: d for s, d in drift.items() if requested.get(s) != d}
    cursor = json.dumps(drift, sort_keys=True)  # a source back in line is forgotten
    if not todo:
        why = f"re-index already requested: {', '.join(sorted(drift))}" if drift else "every index is current"
        return dg.SensorResult(skip_reason=why, cursor=cursor)
    context.log.info("full re-index: " + "; ".join(f"{s}: {d}" for s, d in sorted(todo.items())))
    return dg.SensorResult(run_requests=[reindex_request(context, todo)], cursor=cursor)


refresh_sensors = [sources_partitions_sensor, tier_cadence_sensor, version_bump_sensor]
