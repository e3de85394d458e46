"""Run one refresh through Dagster from Python (what `freshness run` does): the run is
recorded in the instance at $DAGSTER_HOME and shows up in the UI like any other."""

from __future__ import annotations

from typing import Any

import dagster as dg

from .assets import TIER_TAG
from .liveness import HOST_TAG, reap_dead_runs, this_host
from .partitions import sources_partitions


def run_refresh(
    source: str,
    *,
    tier: str | None = None,
    tags: dict[str, str] | None = None,
    log_level: str = "WARNING",
) -> dict[str, Any]:
    """Materialize the refresh assets for one source and say how it went:

    `status` ("success" | "blocked" | "failure") and `message`; the run's counts whenever
    `vector_index` produced them (else what the crawl knows: `crawled`, `errors`);
    `checks`, every asset check that did not pass; `error_pages` and `flagged_pages`.
    `log_level` is for this process's console only; the instance keeps every event."""
    from .definitions import defs

    instance = dg.DagsterInstance.get()
    reap_dead_runs(instance)  # a killed run's pool slot would make this run wait forever
    if not instance.has_dynamic_partition(sources_partitions.name, source):
        instance.add_dynamic_partitions(sources_partitions.name, [source])
    run_tags = {**(tags or {}), HOST_TAG: this_host(), **({TIER_TAG: tier} if tier else {})}
    result = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance,
        partition_key=source,
        tags=run_tags,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
    )
    out: dict[str, Any] = {"run_id": result.run_id}
    crawl = _output(result, "fetched_pages")
    index = _output(result, "vector_index")
    if index is not None:
        out |= {**index.counts, "reindex_reason": index.reindex_reason}
    elif crawl is not None:
        out |= {"crawled": crawl.crawled, "errors": len(crawl.errors)}
    if crawl is not None:
        out["error_pages"] = dict(sorted(crawl.errors.items())[:20])
        out["flagged_pages"] = dict(sorted(crawl.flagged.items())[:20])
    evaluations = result.get_asset_check_evaluations()
    out["checks"] = [
        {"name": e.check_name, "severity": e.severity.value, "passed": e.passed, "description": e.description}
        for e in evaluations
        if not e.passed
    ]
    blocked = [e for e in evaluations if e.blocking and not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    if blocked and index is None:
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
    return {**out, "status": "success"}


def _output(result: dg.ExecuteInProcessResult, node: str) -> Any:
    """A step's output, or None when the step did not run or failed."""
    try:
        return result.output_for_node(node)
    except dg.DagsterError:
        return None
