"""A failed or blocked refresh that no `freshness` command waited for (a sensor's run, one
launched from the UI) is kept as its source's last attempt too, so `freshness status` shows
it. Dagster's run failure sensor is the hook: the daemon calls it once per failed run of
this code location, and it records what `freshness run` would have printed."""

from __future__ import annotations

import dagster as dg

from ..pipeline.attempts import record_attempt
from .assets import is_refresh
from .resources import FreshnessResource
from .run_summary import summarize
from .tags import PARTITION_TAG


@dg.run_failure_sensor(
    name="failed_refresh_attempts",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps a failed or blocked refresh (a sensor's, the UI's) as its source's last "
    "attempt, which freshness status shows beside the last success.",
)
def failed_refresh_attempts(context: dg.RunFailureSensorContext, freshness: FreshnessResource) -> None:
    run = context.dagster_run
    source = run.tags.get(PARTITION_TAG)
    settings = freshness.settings()
    if source is None or source not in {s.name for s in settings.sources} or not is_refresh(run):
        return  # a run over several partitions (a backfill's), of a source no longer listed, of checks only
    record_attempt(settings, source, summarize(context))
