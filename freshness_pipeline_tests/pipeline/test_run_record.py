"""A run's own record (`pipeline/run_record.py`), written by its steps on SQLite and on the real
Postgres, and the outcome read from it with the run's status: counts, pages, checks, a
block named by its check, a step's error, a commit that landed in a run that failed."""

from __future__ import annotations

import pytest

from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.cli.render import run_lines
from freshness_pipeline.pipeline import run_record
from freshness_pipeline.pipeline.crawl import CrawlReport

RUN = "0b4f1d1e-run"


@pytest.fixture
def store(any_state_url: str) -> StateStore:
    migrate(any_state_url)
    return StateStore(any_state_url)


def crawl_report() -> CrawlReport:
    report = CrawlReport("docs", RUN, crawled=3)
    report.errors = {"http://d.test/b": "HTTP 500"}
    report.warnings = ["quarantine collapsed: 1 held (http://d.test/c), 0 taken, 0 released"]
    return report


def test_the_steps_writes_merge_into_one_record(store: StateStore) -> None:
    run_record.started(store, RUN, "docs", "hot")
    report = crawl_report()
    report.flagged = {"http://d.test/b": "3 consecutive errors", "http://d.test/c": "held: collapsed"}
    report.dead_links = ["http://d.test/e"]
    run_record.crawled(store, RUN, report)
    run_record.sectioned(store, RUN, "docs", ["a section warning"], {"http://d.test/d": "over the page deadline"})
    run_record.indexing(store, RUN, "docs")
    record = store.runs.run_record(RUN)
    assert record is not None
    assert (record["source"], record["tier"], record["status"], record["holder"]) == ("docs", "hot", "running", None)
    facts = record["facts"]
    # b is in error (flagged too), c is held, e is a dead link: the counts of the run line
    assert facts["crawl"] == {"crawled": 3, "errors": 1, "skipped": 0, "held": 1, "dead_links": 1}
    assert facts["pages"]["errors"] == {"http://d.test/b": "HTTP 500"}
    assert facts["warnings"] == [*crawl_report().warnings, "a section warning"]
    assert facts["running"] == ["vector_index"]
    pages = run_record.outcome(RUN, "FAILURE", record, None)["error_pages"]
    assert pages == {"http://d.test/b": "HTTP 500", "http://d.test/d": "over the page deadline"}
    run_record.indexed(store, RUN, "docs", 1.25)
    record = store.runs.run_record(RUN)
    assert record is not None and record["status"] == "success"
    assert record["facts"]["committed"] is True and record["facts"]["running"] == []
    done = run_record.outcome(RUN, "SUCCESS", record, {"counts": {"embedded": 4}, "reason": None})
    # the run's work, as bench.overhead reads it
    assert (done["status"], done["embedded"], done["seconds"]) == ("success", 4, 1.25)
    assert [r["run_id"] for r in store.runs.run_records("docs")] == [RUN]


def test_a_failed_blocking_check_is_the_outcome_without_any_event(store: StateStore) -> None:
    run_record.started(store, RUN, "docs", None)
    run_record.crawled(store, RUN, crawl_report())
    run_record.check_failed(store, RUN, "docs", "flagged_pages", "WARN", "1 page flagged", blocking=False)
    run_record.check_failed(store, RUN, "docs", "change_spike", "ERROR", "change share 100%", blocking=True)
    record = store.runs.run_record(RUN)
    assert record is not None and record["status"] == "blocked" and record["tier"] == "all"
    out = run_record.outcome(RUN, "FAILURE", record, None)
    assert out["status"] == "blocked" and out["message"] == "change_spike: change share 100%"
    assert [c["name"] for c in out["checks"]] == ["flagged_pages", "change_spike"]
    assert out["crawled"] == 3 and out["error_pages"] == {"http://d.test/b": "HTTP 500"}


def test_a_steps_error_and_a_commit_that_landed(store: StateStore) -> None:
    run_record.started(store, RUN, "docs", None)
    run_record.step_failed(store, RUN, "docs", "freshness_metrics", "OSError: disk full", interrupted=False)
    record = store.runs.run_record(RUN)
    commit = {"counts": {"new": 2, "embedded": 4}, "reason": None}
    out = run_record.outcome(RUN, "FAILURE", record, commit)
    assert out["status"] == "failure" and out["committed"] is True and out["new"] == 2
    assert (
        out["message"] == "freshness_metrics: OSError: disk full (its commit had landed: the counts above are indexed)"
    )
    assert run_record.outcome(RUN, "SUCCESS", record, commit)["status"] == "success"


def test_a_run_that_ended_unseen_by_its_steps(store: StateStore) -> None:
    """Failed outside its steps, canceled, or ended while vector_index was still running."""
    assert run_record.outcome(RUN, "FAILURE", None, None)["message"].startswith("run FAILURE outside its steps")
    canceled = run_record.outcome(RUN, "CANCELED", None, None)
    assert (canceled["status"], canceled["message"]) == ("failure", "run CANCELED")
    run_record.indexing(store, RUN, "docs")
    out = run_record.outcome(RUN, "FAILURE", store.runs.run_record(RUN), None)
    assert "vector_index was still running in its worker when the run ended" in out["message"]


def test_a_success_with_no_record_here_says_its_record_is_elsewhere() -> None:
    """`--submit` from a machine whose state store is not the deployment's: Dagster says
    SUCCESS, and this store holds nothing of the run. No counts are made up."""
    done = run_record.outcome(RUN, "SUCCESS", None, None)
    assert (done["status"], done["warnings"]) == ("success", [run_record.UNRECORDED])
    assert run_lines("docs", done) == ["docs: no counts recorded", f"  warning: {run_record.UNRECORDED}"]
