"""The one place the project calls Dagster outside its public API (docs/decisions/0003): a run
whose process is gone, found by `pipeline/source_runs.py`, is failed with its reason and its
pool slots are freed, on an instance that may have no daemon to do either.
`defs/test_dead_runs_adapter.py` fails when Dagster changes either call."""

from __future__ import annotations

import dagster as dg


def fail_dead_run(instance: dg.DagsterInstance, run: dg.DagsterRun, reason: str) -> None:
    """Fail `run` (FAILURE, with `reason` as its run failure event's message, as the UI shows
    it) and free the pool slots (`embeddings`) it held, as run monitoring would."""
    instance.report_run_failed(run, message=reason)
    instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
