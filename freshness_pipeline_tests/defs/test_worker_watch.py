"""What `--submit` says of a run's workers while it waits (`WorkerWatch`), with the run's public
GraphQL answers and its `step_beats` rows given and the clock injected: a step due and
started by no worker, a worker that stopped heartbeating (with when its task comes back),
a step that started again; each said once. And, through a real in-process run, what the
run's events say when a step finds the row a start on a lost worker left behind."""

from __future__ import annotations

import io
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.config import load_settings, state_url
from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.defs.executors import BROKER_TAG, CELERY_QUEUE_TAG, VISIBILITY_TAG
from freshness_pipeline.defs.worker_watch import WorkerWatch
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.step_beats import STALE_BEATS, this_process, utc
from freshness_pipeline_tests.defs.harness import SOURCE
from freshness_pipeline_tests.sitegen import generate

RUN = "run-1"
BEAT_S = 5  # runs.beat_s of the test's sources file
WORKER_NOTE_S = STALE_BEATS * BEAT_S  # a step due this long and not started: waiting for a worker
CHAIN = ("fetched_pages", "section_manifest", "diff_plan", "vector_index", "freshness_metrics")


class Deployment:
    """The run as the webserver's GraphQL API answers (`runOrError`), and its beat rows."""

    def __init__(self, tags: dict[str, str]) -> None:
        self.tags, self.stats, self.rows = tags, {}, {}
        self.steps = [
            {
                "key": step,
                "metadata": [{"key": CELERY_QUEUE_TAG, "value": "embeddings"}] if step == "vector_index" else [],
                "inputs": [{"dependsOn": [{"key": CHAIN[i - 1]}]}] if i else [],
            }
            for i, step in enumerate(CHAIN)
        ]

    def query(self, query: str, variables: dict[str, Any], name: str) -> dict[str, Any]:
        assert variables == {"runId": RUN} and name == "runOrError"
        run: dict[str, Any] = {"__typename": "Run"}
        if "executionPlan" in query:
            run |= {
                "tags": [{"key": k, "value": v} for k, v in self.tags.items()],
                "executionPlan": {"steps": self.steps},
            }
        if "stepStats" in query:
            run["stepStats"] = [{"stepKey": k, "status": v} for k, v in self.stats.items()]
        return run


def _watch(tmp_path: Path, deployment: Deployment, now: list[float]) -> tuple[WorkerWatch, io.StringIO]:
    sources = tmp_path / "sources.yaml"
    source = {"name": "docs", "sitemap": "http://127.0.0.1:1/sitemap.xml"}
    sources.write_text(yaml.safe_dump({"sources": [source], "runs": {"beat_s": BEAT_S}}))
    out = io.StringIO()
    rows = lambda run_id: deployment.rows  # noqa: E731
    watch = WorkerWatch(deployment.query, load_settings(sources), RUN, "docs", rows=rows, clock=lambda: now[0], out=out)
    return watch, out


def test_a_step_no_worker_starts_is_said_once_with_its_queue(tmp_path: Path) -> None:
    deployment = Deployment({BROKER_TAG: "redis://127.0.0.1:6379/0"})
    now = [1000.0]
    watch, out = _watch(tmp_path, deployment, now)
    deployment.stats = {"fetched_pages": "SUCCESS", "section_manifest": "SUCCESS", "diff_plan": "SUCCESS"}
    watch.look()
    now[0] += WORKER_NOTE_S - 0.1
    watch.look()
    assert out.getvalue() == ""
    now[0] += 0.1
    for _ in range(3):
        watch.look()
    assert out.getvalue() == (
        "docs: vector_index waiting for a worker (queue embeddings): submitted to Celery, started by no worker yet\n"
    )


def test_the_first_step_waiting_and_no_note_off_celery(tmp_path: Path) -> None:
    for tags, said in (
        ({BROKER_TAG: "pyamqp://guest:***@h:5672//"}, "docs: fetched_pages waiting for a worker (queue dagster)"),
        ({}, ""),  # multiprocess or in-process: no queue to wait in
    ):
        now = [0.0]
        watch, out = _watch(tmp_path, Deployment(tags), now)
        watch.look()
        now[0] += WORKER_NOTE_S
        watch.look()
        assert out.getvalue().startswith(said) and bool(out.getvalue()) is bool(said), out.getvalue()


def test_a_worker_that_stopped_heartbeating_is_said_once_with_when_its_task_comes_back(tmp_path: Path) -> None:
    deployment = Deployment({BROKER_TAG: "redis://127.0.0.1:6379/0", VISIBILITY_TAG: "1800"})
    deployment.stats = {s: "SUCCESS" for s in CHAIN[:3]} | {"vector_index": "IN_PROGRESS"}
    row = {"holder": "w1 pid 7", "started_at": 1000.0, "beat_at": 1100.0, "starts": 1}
    deployment.rows = {"vector_index": row}
    now = [1100.0 + STALE_BEATS * BEAT_S]
    watch, out = _watch(tmp_path, deployment, now)
    watch.look()
    assert out.getvalue() == ""
    now[0] += 1
    watch.look()
    now[0] += 60
    watch.look()
    assert out.getvalue() == (
        "docs: vector_index on w1 pid 7 stopped heartbeating 16 s ago; its task comes back when Celery's "
        "visibility timeout (1800 s after its delivery) ends, in about 1684 s, or the run's max runtime ends it\n"
    )
    # The broker hands the task out again: the new start is said, and its own stop would be too.
    deployment.rows = {
        "vector_index": row | {"holder": "w2 pid 9", "started_at": now[0], "beat_at": now[0], "starts": 2}
    }
    watch.look()
    watch.look()
    assert out.getvalue().splitlines()[1:] == ["docs: vector_index restarted on w2 pid 9 (start 2): its task came back"]


def test_rabbitmq_and_a_max_runtime_tag(tmp_path: Path) -> None:
    deployment = Deployment({BROKER_TAG: "pyamqp://guest:***@h:5672//", "dagster/max_runtime": "600"})
    deployment.rows = {"diff_plan": {"holder": "w1 pid 7", "started_at": 0.0, "beat_at": 0.0, "starts": 1}}
    now = [100.0]
    watch, out = _watch(tmp_path, deployment, now)
    watch.look()
    assert out.getvalue() == (
        "docs: diff_plan on w1 pid 7 stopped heartbeating 100 s ago; its task comes back once the broker "
        "pyamqp://guest:***@h:5672// drops the worker's connection, or the run's max runtime (600 s) ends it\n"
    )


def test_a_run_whose_step_finds_a_lost_workers_row_says_why_it_started_again(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    site.publish(generate(2, sections_per_page=1, seed=5).markdown())
    url = state_url(load_settings(sources))
    migrate(url)
    run_id = str(uuid.uuid4())
    store = StateStore(url)
    killed_at = time.time() - 3600  # a worker killed mid-step an hour ago; its task comes back now
    store.beats.start(run_id, "vector_index", "lost-host pid 1", killed_at)
    result = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=SOURCE, run_id=run_id, raise_on_error=False
    )
    assert result.success
    entries = [r.event_log_entry for r in instance.get_records_for_run(run_id).records]
    notes = [e.user_message for e in entries if e.level == logging.WARNING and "restarted" in e.user_message]
    assert notes == [
        f"vector_index restarted (start 2) on {this_process()}: its previous worker lost-host pid 1 stopped "
        f"heartbeating at {utc(killed_at)} without ending the step; Celery redelivered its task"
    ]
    assert store.beats.of_run(run_id) == {}  # every step ended: no row left
    store.close()
