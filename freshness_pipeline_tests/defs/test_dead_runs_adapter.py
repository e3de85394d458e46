"""`defs/dead_runs.py`, the one place the package calls Dagster outside its public API
(docs/decisions/0003): a run left STARTED holding a pool slot is failed, with its reason as
its failure event's message, and its slots are freed. Fails when Dagster changes either."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.defs.dead_runs import fail_dead_run
from freshness_pipeline_tests.defs.harness import SOURCE


@pytest.fixture
def instance(dagster_home: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.get() as inst:
        yield inst


def test_a_dead_run_is_failed_with_its_reason_and_its_slot_freed(instance: dg.DagsterInstance) -> None:
    @dg.op
    def step() -> None: ...

    @dg.job
    def job() -> None:
        step()

    # A run as a killed `freshness run` leaves it: STARTED, holding a slot of its pool.
    run = instance.create_run_for_job(job, tags={"dagster/partition": SOURCE}, status=dg.DagsterRunStatus.STARTED)
    storage = instance.event_log_storage
    storage.set_concurrency_slots("embeddings", 1)
    claim = storage.claim_concurrency_slot("embeddings", run.run_id, "step")
    assert claim.is_claimed and storage.get_concurrency_run_ids() == {run.run_id}
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED

    fail_dead_run(instance, run, "its process (host pid 1) is gone")

    record = instance.get_run_record_by_id(run.run_id)
    assert record is not None and record.dagster_run.status == dg.DagsterRunStatus.FAILURE
    assert record.end_time is not None
    (failure,) = instance.fetch_run_status_changes(dg.DagsterEventType.RUN_FAILURE, limit=10).records
    assert failure.event_log_entry.message == "its process (host pid 1) is gone"
    assert storage.get_concurrency_run_ids() == set()
