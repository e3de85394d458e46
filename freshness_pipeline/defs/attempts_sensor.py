"""A failed, blocked or canceled refresh that no `freshness` command waited for (a sensor's
run, one launched from the UI) is kept as its source's last attempt too, so `freshness
status` shows it. Dagster's run status sensors are the hook: the daemon calls them once per
failed (canceled) run of this code location, and they record what `freshness run` would
have printed, read from the run's own record and its status (`pipeline/run_record.py`)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from ..config import Settings
from ..pipeline import run_record
from ..pipeline.attempts import record_attempt
from .assets import is_refresh
from .executors import BROKER_TAG, broker_unreachable
from .resources import FreshnessResource
from .tags import PARTITION_TAG


def attempt_of(run: dg.DagsterRun, instance: dg.DagsterInstance, settings: Settings) -> dict[str, Any]:
    """The outcome of `run` (ended), from its record and its status as the instance has it. A
    Celery run that failed with no step of it recording why, whose broker this process cannot
    reach either, is said to have failed on that broker (named as the run's tag shows it)."""
    source, current = run.tags.get(PARTITION_TAG, ""), instance.get_run_by_id(run.run_id)
    status = (current or run).status.value
    record, commit = run_record.read(settings, source, run.run_id)
    cause = None
    broker = run.tags.get(BROKER_TAG)
    if broker is not None and status == "FAILURE" and run_record.is_unexplained(record):
        why = broker_unreachable(broker)
        cause = why and f"the Celery broker {broker} is unreachable: {why}"
    return run_record.outcome(run.run_id, status, record, commit, cause)


def _keep(run: dg.DagsterRun, instance: dg.DagsterInstance, freshness: FreshnessResource) -> None:
    source = run.tags.get(PARTITION_TAG)
    settings = freshness.settings()
    if source is None or source not in {s.name for s in settings.sources} or not is_refresh(run):
        return  # a run over several partitions (a backfill's), of a source no longer listed, of checks only
    record_attempt(settings, source, attempt_of(run, instance, settings))


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
