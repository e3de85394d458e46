"""How a refresh run ended: its own record (`pipeline/run_record.py`) beside what Dagster's
public API says of the run, its status and, for a run that failed where no step of it
recorded why (run monitoring's max runtime, a resource that did not start), the reason its
run failure gives, shown as it is. What `freshness run` returns and the run status sensors
keep (`attempts_sensor.py`)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from ..config import Settings
from ..pipeline import run_record
from .executors import BROKER_TAG, broker_unreachable
from .tags import PARTITION_TAG

FAILURES_READ = 100  # run failures read after the run was made, to find its own


def ended(instance: dg.DagsterInstance, settings: Settings, run: dg.DagsterRun) -> dict[str, Any]:
    """`run_record.outcome` of `run` (ended), with its status as the instance has it now."""
    source, current = run.tags.get(PARTITION_TAG, ""), instance.get_run_by_id(run.run_id)
    status = (current or run).status.value
    record, commit = run_record.read(settings, source, run.run_id)
    cause = None
    if status == "FAILURE" and run_record.is_unexplained(record):
        cause = _broker(run) or _failure_reason(instance, run.run_id)
    return run_record.outcome(run.run_id, status, record, commit, cause)


def _broker(run: dg.DagsterRun) -> str | None:
    """A Celery run's broker, when this process cannot reach it either (named as the run's tag
    shows it, without its password)."""
    broker = run.tags.get(BROKER_TAG)
    why = broker_unreachable(broker) if broker is not None else None
    return None if why is None else f"the Celery broker {broker} is unreachable: {why}"


def _failure_reason(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """The message of the run's failure, as the UI shows it on the run's page."""
    made = instance.get_run_record_by_id(run_id)
    since = made.create_timestamp.timestamp() if made is not None else None
    where = dg.RunStatusChangeRecordsFilter(dg.DagsterEventType.RUN_FAILURE, after_timestamp=since)
    for change in instance.fetch_run_status_changes(where, limit=FAILURES_READ).records:
        entry = change.event_log_entry
        if entry.run_id == run_id and entry.message:
            return f"{run_record.OUTSIDE}: {entry.message.strip()}"
    return None
