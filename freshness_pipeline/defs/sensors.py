"""The sensors that operate the pipeline (each one's description says what it does;
docs/dagster.md how they fit). The tier and version-bump sensors launch runs and start off
unless `FRESHNESS_SENSORS=on` (`automation.py`). A sources file that does not load fails
the tick (its ConfigError names the file and the setting): a broken file must not pass for
"nothing to do"."""

import hashlib
import json
import time
from contextlib import closing
from dataclasses import dataclass, field

import dagster as dg

from ..adapters.state.store import StateStore
from ..config import Settings, Source, state_url
from ..core.backoff import retry_wait
from ..core.cadence import Due, due, intervals
from ..core.tiers import TIERS
from ..pipeline.context import versions_for
from .assets import is_refresh, refresh_job
from .automation import launching_sensors_status
from .partitions import SOURCES, sources_partitions
from .resources import FreshnessResource
from .tags import PARTITION_TAG, TIER_TAG

REINDEX_TAG = "freshness/reindex"
RUN_LOOKBACK = 100  # recent runs per source searched for untagged runs and runs in flight


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a sources partition for every source of the sources file. A source removed "
    "from the file keeps its partition, history and index; it is only no longer scheduled.",
)
def sources_partitions_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    names = [s.name for s in freshness.settings().sources]
    known = set(context.instance.get_dynamic_partitions(SOURCES))
    new = [n for n in names if n not in known]
    retired = sorted(known - set(names))
    if retired:
        context.log.info(f"not in the sources file, kept but not scheduled: {', '.join(retired)}")
    if not new:
        return dg.SkipReason("every source has its partition")
    return dg.SensorResult(dynamic_partitions_requests=[sources_partitions.build_add_request(new)])


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

    def failures_in_a_row(self) -> list[float]:
        """Start times of the failed refreshes since the latest successful one."""
        last_success = max(self.last.values(), default=0.0)
        return [t for t in self.failed if t > last_success]


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
            if run.run_id in seen or not is_refresh(run):
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


@dg.sensor(
    job=refresh_job,
    minimum_interval_seconds=300,
    default_status=launching_sensors_status(),
    description="Launches a refresh run tagged freshness/tier for each source whose hot, warm or "
    "cold tier is due (tiers.*_every_h in the sources file). A failed refresh is retried, backing "
    "off per source up to the tier's cadence; the skip reason says why each source waits.",
)
def tier_cadence_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    settings = freshness.settings()
    now = time.time()
    requests, waiting = [], []
    # A source without its partition yet (sources_partitions_sensor has not ticked) gets it
    # in this tick's result, with its first run: the first crawl does not wait an interval.
    new = [s.name for s in settings.sources if not context.instance.has_dynamic_partition(SOURCES, s.name)]
    for src in settings.sources:
        request, why = _tier_request(context.instance, src, now)
        if request is not None:
            requests.append(request)
        else:
            waiting.append(f"{src.name}: {why}")
    if waiting and requests:
        context.log.info("; ".join(waiting))
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[sources_partitions.build_add_request(new)] if new else None,
        skip_reason=None if requests else "; ".join(waiting) or "no source in the sources file",
    )


def _tier_request(instance: dg.DagsterInstance, src: Source, now: float) -> tuple[dg.RunRequest | None, str]:
    """The run to launch for a source now, or None and why it waits."""
    runs = _last_runs(instance, src.name)
    if runs.busy:
        return None, "a refresh is queued or running"
    next_up = due(runs.last, src.tiers.cadence(), now)
    if next_up is None:
        return None, "no tier is due"
    failures = runs.failures_in_a_row()
    wait = retry_wait(len(failures), _cadence(src, next_up))
    if failures and now < max(failures) + wait:
        at = time.strftime("%H:%M UTC", time.gmtime(max(failures) + wait))
        return None, f"{len(failures)} failed refreshes in a row, backing off {wait / 60:.0f} min: next try after {at}"
    tier = next_up.tier
    return (
        dg.RunRequest(
            run_key=f"{src.name}:{tier or 'all'}:{next_up.since:.0f}{runs.attempt(next_up.since)}",
            partition_key=src.name,
            tags={TIER_TAG: tier} if tier else {},
        ),
        "",
    )


def _cadence(src: Source, next_up: Due) -> float:
    """The due tier's interval; for a full run, the shortest one."""
    every = intervals(src.tiers.cadence())
    return every[next_up.tier] if next_up.tier else min(every.values())


def _version_drift(settings: Settings) -> dict[str, str]:
    """Source -> what differs between its active index and what a refresh would build now."""
    out = {}
    # An outdated schema fails the tick, naming the way out.
    with closing(StateStore(state_url(settings), read_only=True)) as store:
        for src in settings.sources:
            state = store.sources.get(src.name)
            if state is not None and state.generation > 0 and (diffs := versions_for(settings, src).differences(state)):
                out[src.name] = "; ".join(diffs)
    return out


def reindex_requests(drift: dict[str, str]) -> list[dg.RunRequest]:
    """One `refresh` run per drifted source's partition, tagged with what changed."""
    return [
        dg.RunRequest(
            run_key=f"reindex:{source}:{hashlib.sha1(why.encode()).hexdigest()[:12]}",
            partition_key=source,
            tags={REINDEX_TAG: f"{source}: {why}"[:4000]},
        )
        for source, why in sorted(drift.items())
    ]


@dg.sensor(
    job=refresh_job,
    minimum_interval_seconds=300,
    default_status=launching_sensors_status(),
    description="Re-indexes a source when the normalizer, chunker or embedding model a refresh would "
    "build with differs from its index's: one refresh run per drifted source, tagged "
    "freshness/reindex with what changed. Asked once per change (the cursor remembers).",
)
def version_bump_sensor(
    context: dg.SensorEvaluationContext, freshness: FreshnessResource
) -> dg.SensorResult | dg.SkipReason:
    settings = freshness.settings()
    requested: dict[str, str] = json.loads(context.cursor or "{}")
    drift = {s: d for s, d in _version_drift(settings).items() if context.instance.has_dynamic_partition(SOURCES, s)}
    todo = {s: d for s, d in drift.items() if requested.get(s) != d}
    cursor = json.dumps(drift, sort_keys=True)  # a source back in line is forgotten
    if not todo:
        why = f"re-index already requested: {', '.join(sorted(drift))}" if drift else "every index is current"
        return dg.SensorResult(skip_reason=why, cursor=cursor)
    context.log.info("full re-index: " + "; ".join(f"{s}: {d}" for s, d in sorted(todo.items())))
    return dg.SensorResult(run_requests=reindex_requests(todo), cursor=cursor)


refresh_sensors = [sources_partitions_sensor, tier_cadence_sensor, version_bump_sensor]
