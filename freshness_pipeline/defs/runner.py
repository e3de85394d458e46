"""Run one refresh through Dagster from Python (what `freshness run` does): the run is
recorded in the instance at $DAGSTER_HOME and shows up in the UI like any other."""

from __future__ import annotations

from typing import Any

import dagster as dg

from .assets import TIER_TAG
from .partitions import sources_partitions


def run_refresh(
    source: str,
    *,
    tier: str | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "WARNING",
) -> dict[str, Any]:
    """Materialize the four assets for one source. Returns the run's counts and status.

    `log_level` is for this process's console only; the instance keeps every event."""
    from .definitions import defs

    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition(sources_partitions.name, source):
        instance.add_dynamic_partitions(sources_partitions.name, [source])
    run_tags = {**(tags or {}), **({TIER_TAG: tier} if tier else {})}
    result = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance,
        partition_key=source,
        tags=run_tags,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
    )
    out: dict[str, Any] = {"run_id": result.run_id}
    blocked = [e for e in result.get_asset_check_evaluations() if e.blocking and not e.passed]
    if blocked:
        message = "; ".join(f"{e.check_name}: {e.description or 'failed'}" for e in blocked)
        return {**out, "status": "blocked", "message": message}
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        message = "; ".join(
            # The user error (the cause), not Dagster's "Error occurred while executing op" wrapper.
            f"{e.step_key}: {(e.step_failure_data.error.cause or e.step_failure_data.error).message.strip()}"
            for e in failures
            if e.step_failure_data.error
        )
        return {**out, "status": "failure", "message": message}
    report = result.output_for_node("vector_index")
    return {**out, "status": "success", **report.counts, "reindex_reason": report.reindex_reason}
