"""What a refresh run did, read from its events (the assets' metadata, the checks, the
failures): the summary `freshness run` prints and `attempts_sensor.py` keeps. No asset value
is loaded, and nothing here loads the code location."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import dagster as dg

from .executors import BROKER_TAG
from .metadata import INDEX_EXTRAS

if TYPE_CHECKING:  # the type of Dagster's error records; not part of its public API
    from dagster_shared.error import SerializableErrorInfo

SHOWN_ERRORS = 20
# The error of the steps and the run that Dagster ends because a SIGINT (or SIGTERM) reached
# the process executing them: in-process, this command's own Ctrl-C.
INTERRUPTED = dg.DagsterExecutionInterruptedError.__name__


def summarize(instance: dg.DagsterInstance, run_id: str) -> dict[str, Any]:
    """What `run_refresh` returns, read from the run's events (the assets' metadata), the
    same for both ways of running; no asset value is loaded."""
    run = instance.get_run_by_id(run_id)
    assert run is not None
    done = _materialized(instance, run_id)
    crawl, index = done.get("fetched_pages"), done.get("vector_index")
    out: dict[str, Any] = {"run_id": run_id}
    if index is not None:  # its metadata are the run's counts and a few extras
        out |= {k: v for k, v in index.items() if k not in INDEX_EXTRAS}
        out["reindex_reason"] = index.get("reindex_reason")
    elif crawl is not None:
        out |= {k: crawl[k] for k in ("crawled", "errors", "skipped")}
    sections = done.get("section_manifest") or {}
    if crawl is not None:
        review = crawl.get("pages_to_review") or {}
        out["skipped_pages"] = _first(review.get("skipped"))
        out["warnings"] = list(crawl.get("warnings") or []) + list(sections.get("warnings") or [])
        out["error_pages"] = _first(review.get("errors"))
        out["flagged_pages"] = _first(review.get("flagged"))
    checked = _events(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    evaluations = [e.asset_check_evaluation_data for e in checked]
    out["checks"] = [
        {"name": e.check_name, "severity": e.severity.value, "passed": e.passed, "description": e.description}
        for e in evaluations
        if not e.passed
    ]
    blocked = [e for e in evaluations if e.blocking and not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    if blocked and index is None:
        message = "; ".join(f"{e.check_name}: {e.description or 'failed'}" for e in blocked)
        return {**out, "status": "blocked", "message": message}
    if run.status != dg.DagsterRunStatus.SUCCESS:
        message = _failure(instance, run_id, run.tags.get(BROKER_TAG)) or f"run {run.status.value}"
        return {**out, "status": "failure", "message": message}
    return {**out, "status": "success"}


def interrupted(events: Iterable[dg.DagsterEvent]) -> bool:
    """Whether these events end a run that Dagster failed on an interrupt (`INTERRUPTED`)."""
    failures = (e for e in events if e.is_step_failure or e.event_type == dg.DagsterEventType.RUN_FAILURE)
    errors = (getattr(e.event_specific_data, "error", None) for e in failures)
    return any(error is not None and error.cls_name == INTERRUPTED for error in errors)


def _first(pages: dict[str, str] | None) -> dict[str, str]:
    return dict(sorted((pages or {}).items())[:SHOWN_ERRORS])


def _events(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
    records = instance.get_records_for_run(run_id, of_type=kind).records
    return [r.event_log_entry.dagster_event for r in records if r.event_log_entry.dagster_event]


def _materialized(instance: dg.DagsterInstance, run_id: str) -> dict[str, dict[str, Any]]:
    """Asset -> its materialization's metadata values, for the assets this run materialized."""
    out = {}
    for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records:
        m = r.event_log_entry.asset_materialization
        if m is not None:
            out[m.asset_key.to_user_string()] = {k: v.value for k, v in m.metadata.items()}
    return out


def _failure(instance: dg.DagsterInstance, run_id: str, broker: str | None = None) -> str:
    """Why the run failed, in its own words: the user errors of the failed steps (the cause,
    not Dagster's "Error occurred while executing op" wrapper), else the innermost cause of
    the run's failure (a resource that did not start, a Celery worker lost, a broker that
    refused: Dagster's message says only "An exception was thrown during execution"), else
    the run's own failure message (a killed run, say). A failure in the Celery client (the
    broker refused or dropped the connection) names the broker: `broker`, the run's tag."""
    steps = [
        f"{e.step_key}: {_message(e.step_failure_data.error.cause or e.step_failure_data.error)}"
        for e in _events(instance, run_id, dg.DagsterEventType.STEP_FAILURE)
        if e.step_failure_data.error
    ]
    if steps:
        return "; ".join(steps)
    failures = _events(instance, run_id, dg.DagsterEventType.RUN_FAILURE)
    # A run failed from outside (a dead run's reaper, run monitoring) has no error record.
    errors = [getattr(e.event_specific_data, "error", None) for e in failures]
    causes = [_broker(error, broker) + _cause(error) for error in errors if error is not None]
    return "; ".join(causes or [(e.message or "").strip() for e in failures]).strip()


def _broker(error: SerializableErrorInfo, broker: str | None) -> str:
    """ "the Celery broker URL: " when the error chain went through Celery's broker client
    (kombu), whose errors (ConnectionRefusedError, Error 111 connecting to host:port) name no
    service; else ""."""
    chain: list[SerializableErrorInfo] = []
    link: SerializableErrorInfo | None = error
    while link is not None:
        chain.append(link)
        link = link.cause
    if not any("/kombu/" in frame for e in chain for frame in e.stack):
        return ""
    return f"the Celery broker {broker or '($FRESHNESS_CELERY_BROKER)'} is unreachable: "


def _cause(error: SerializableErrorInfo) -> str:
    """The innermost exception of a chain (what a run failure wraps many times over)."""
    while error.cause is not None:
        error = error.cause
    return _message(error)


def _message(error: SerializableErrorInfo) -> str:
    """An exception as `ClassName: message`, no module path. A step's own error is the one
    under Dagster's wrapper: it names the source and what was kept, which its causes don't."""
    return re.sub(r"^[\w.]+\.(\w+: )", r"\1", error.message.strip())
