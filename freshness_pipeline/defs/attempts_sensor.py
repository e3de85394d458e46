"""A failed, blocked or canceled refresh that no `freshness` command waited for (a sensor's
run, one launched from the UI) is kept as its source's last attempt too, so `freshness
status` shows it. Dagster's run status sensors are the hook: the daemon calls them once per
failed (canceled) run of this code location, and they record what `freshness run` would
have printed (`run_status.py`)."""

from __future__ import annotations

import dagster as dg

from ..pipeline.attempts import record_attempt
from .assets import is_refresh
from .resources import FreshnessResource
from .run_status import ended
from .tags import PARTITION_TAG


def _keep(run: dg.DagsterRun, instance: dg.DagsterInstance, freshness: FreshnessResource) -> None:
    source = run.tags.get(PARTITION_TAG)
    settings = freshness.settings()
    if source is None or source not in {s.name for s in settings.sources} or not is_refresh(run):
        return  # a run over several partitions (a backfill's), of a source no longer listed, of checks only
    record_attempt(settings, source, ended(instance, settings, run))


@dg.run_failure_sensor(
    name="failed_refresh_attempts",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps a failed or blocked refresh (a sensor's, the UI's) as its source's last "
    "attempt, which freshness status shows beside the last success.",
)
def failed_refresh_attempts(context: dg.RunFailureSensorContext, freshness: FreshnessResource) -> None:
    _keep(context.dagster_run, context.instance, freshness)


@dg.run_status_sensor(
    name="canceled_refresh_attempts",
    run_status=dg.DagsterRunStatus.CANCELED,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps a canceled refresh as its source's last attempt, which freshness status "
    "shows beside the last success.",
)
def canceled_refresh_attempts(context: dg.RunStatusSensorContext, freshness: FreshnessResource) -> None:
    _keep(context.dagster_run, context.instance, freshness)
