"""What a refresh run did, read from its events (the assets' metadata, the checks, the
failures): the summary `freshness run` prints and `attempts_sensor.py` keeps. No asset value
is loaded, and nothing here loads the code location.

The events come from where the run was watched: an in-process run's result, the failure
sensor's context and the run's materializations (`summarize`), or a deployment's GraphQL API (`remote.py`); each reader
makes `RunFacts`, and `outcome` is the one summary of them. A run that did not succeed may
still have committed (interrupted or failed after its commit, a run failed from outside
while its step went on): the state store records every commit with its run id, and the
summary says what was committed. A run that ended while vector_index was still running in
its worker is said so: that step does not commit for a run that ended (`step_endings.py`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg

from ..config import Settings, load_settings
from ..pipeline.attempts import committed
from .executors import BROKER_TAG
from .metadata import INDEX_EXTRAS
from .tags import PARTITION_TAG

if TYPE_CHECKING:  # the type of Dagster's error records; not part of its public API
    from dagster_shared.error import SerializableErrorInfo

SHOWN_ERRORS = 20
INDEX_STEP = "vector_index"  # the step that commits
SUMMARIZED = ("fetched_pages", "section_manifest", "vector_index")  # the assets `outcome` reads
# The error of the steps and the run that Dagster ends because a SIGINT (or SIGTERM) reached
# the process executing them: in-process, this command's own Ctrl-C.
INTERRUPTED = dg.DagsterExecutionInterruptedError.__name__
# The error of a step whose blocking check failed with ERROR (a class Dagster does not export).
CHECK_FAILED = "DagsterAssetCheckFailedError"


@dataclass(frozen=True)
class Check:
    name: str
    severity: str  # "ERROR" | "WARN"
    passed: bool
    description: str | None


@dataclass
class RunFacts:
    """What a summary needs of a run, whoever read it."""

    run_id: str
    source: str | None  # its partition
    succeeded: bool
    status: str  # Dagster's run status, e.g. "FAILURE"
    materialized: dict[str, dict[str, Any]] = field(default_factory=dict)  # asset -> metadata values
    checks: list[Check] = field(default_factory=list)
    step_failures: list[str] = field(default_factory=list)  # "step: Error: message"
    run_failures: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # the checks that stopped their step (`CHECK_FAILED`)
    running: list[str] = field(default_factory=list)  # steps started and not ended when read


def outcome(facts: RunFacts, settings: Settings | None = None) -> dict[str, Any]:
    """What `run_refresh` returns: `status` ("success" | "blocked" | "failure"), `message`,
    the run's counts (or what the crawl knows), the checks that did not pass, the pages in
    error; `committed` when a run that did not succeed committed all the same."""
    crawl, index = facts.materialized.get("fetched_pages"), facts.materialized.get("vector_index")
    out: dict[str, Any] = {"run_id": facts.run_id}
    if index is not None:  # its metadata are the run's counts and a few extras
        out |= {k: v for k, v in index.items() if k not in INDEX_EXTRAS}
        out["reindex_reason"] = index.get("reindex_reason")
    elif crawl is not None:
        out |= {k: crawl[k] for k in ("crawled", "errors", "skipped")}
    sections = facts.materialized.get("section_manifest") or {}
    if crawl is not None:
        review = crawl.get("pages_to_review") or {}
        out["skipped_pages"] = _first(review.get("skipped"))
        out["warnings"] = list(crawl.get("warnings") or []) + list(sections.get("warnings") or [])
        out["error_pages"] = _first({**(review.get("errors") or {}), **(sections.get("pages_in_error") or {})})
        out["flagged_pages"] = _first(review.get("flagged"))
    failed = [c for c in facts.checks if not c.passed]
    out["checks"] = [
        {"name": c.name, "severity": c.severity, "passed": c.passed, "description": c.description} for c in failed
    ]
    blocked = [c for c in failed if c.name in facts.blocked]
    if blocked and index is None:
        message = "; ".join(f"{c.name}: {c.description or 'failed'}" for c in blocked)
        return {**out, "status": "blocked", "message": message}
    # Without vector_index's materialization, the state store says whether the run committed
    # (it failed or was interrupted after its commit, or was failed from outside meanwhile).
    commit = _commit(facts, settings) if index is None else None
    if commit is not None:
        out |= dict(commit["counts"]) | {"reindex_reason": commit.get("reason"), "committed": True}
    if facts.succeeded:
        return {**out, "status": "success"}
    message = "; ".join(facts.step_failures) or "; ".join(facts.run_failures) or f"run {facts.status}"
    if commit is not None:
        message += " (its commit had landed: the counts above are indexed)"
    elif INDEX_STEP in facts.running:
        message += (
            f"; {INDEX_STEP} was still running in its worker when the run ended: it does not commit "
            "for a run that ended"
        )
    return {**out, "status": "failure", "message": message}


def _commit(facts: RunFacts, settings: Settings | None) -> dict[str, Any] | None:
    if facts.source is None:  # a run of no partition
        return None
    settings = settings or load_settings()
    known = facts.source in {s.name for s in settings.sources}
    return committed(settings, facts.source, facts.run_id) if known else None


def from_events(run: dg.DagsterRun, events: Iterable[dg.DagsterEvent]) -> RunFacts:
    """The facts of `run` from its Dagster events (an in-process result's `all_events`)."""
    facts = RunFacts(
        run.run_id, run.tags.get(PARTITION_TAG), run.status == dg.DagsterRunStatus.SUCCESS, run.status.value
    )
    for e in events:
        if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            m = e.step_materialization_data.materialization
            facts.materialized[m.asset_key.to_user_string()] = {k: v.value for k, v in m.metadata.items()}
        elif e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            c = e.asset_check_evaluation_data
            facts.checks.append(Check(c.check_name, c.severity.value, c.passed, c.description))
        elif e.event_type == dg.DagsterEventType.STEP_START and e.step_key:
            facts.running.append(e.step_key)
        elif e.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            if e.step_key in facts.running:
                facts.running.remove(e.step_key)
            if e.is_step_failure and e.step_failure_data.error:
                failure = e.step_failure_data.error
                facts.step_failures.append(f"{e.step_key}: {short((failure.cause or failure).message)}")
                facts.blocked += failed_checks(failure.cls_name, failure.message)
        elif e.event_type == dg.DagsterEventType.RUN_FAILURE:
            error = getattr(e.event_specific_data, "error", None)  # none for a run failed from outside
            broker = _broker(error, run.tags.get(BROKER_TAG))
            facts.run_failures.append(broker + _cause(error) if error is not None else (e.message or "").strip())
    return facts


def summarize(context: dg.RunFailureSensorContext) -> dict[str, Any]:
    """`outcome` of the failed run of a run failure sensor's `context`: its step and run
    failures from the context, its materializations from the instance (its partition's since
    the run was made). A blocking check that failed is its step's error (the checks' own
    evaluations have no public read)."""
    run, instance = context.dagster_run, context.instance
    record, source = instance.get_run_record_by_id(run.run_id), run.tags.get(PARTITION_TAG)
    since = record.create_timestamp.timestamp() if record is not None else None
    materialized = []
    for key in SUMMARIZED if source is not None else ():
        where = dg.AssetRecordsFilter(dg.AssetKey(key), asset_partitions=[str(source)], after_timestamp=since)
        found = instance.fetch_materializations(where, limit=10).records
        materialized += [r.event_log_entry.dagster_event for r in found if r.run_id == run.run_id]
    failures = context.get_step_failure_events()
    facts = from_events(run, [e for e in [*materialized, *failures, context.failure_event] if e is not None])
    facts.checks += [Check(name, "ERROR", False, None) for name in facts.blocked]
    return outcome(facts)


def failed_checks(error_class: str | None, message: str) -> list[str]:
    """The checks a step's `CHECK_FAILED` error names (Dagster's message: a first line, then
    "asset: check,check" per asset); none for another error."""
    if error_class != CHECK_FAILED:
        return []
    return [n.strip() for line in message.splitlines()[1:] for n in line.split(": ", 1)[-1].split(",")]


def interrupted(events: Iterable[dg.DagsterEvent]) -> bool:
    """Whether these events end a run that Dagster failed on an interrupt (`INTERRUPTED`)."""
    failures = (e for e in events if e.is_step_failure or e.event_type == dg.DagsterEventType.RUN_FAILURE)
    errors = (getattr(e.event_specific_data, "error", None) for e in failures)
    return any(error is not None and error.cls_name == INTERRUPTED for error in errors)


def _first(pages: dict[str, str] | None) -> dict[str, str]:
    return dict(sorted((pages or {}).items())[:SHOWN_ERRORS])


def _broker(error: SerializableErrorInfo | None, broker: str | None) -> str:
    """ "the Celery broker URL: " when the error chain went through Celery's broker client
    (kombu), whose errors (ConnectionRefusedError, Error 111 connecting to host:port) name no
    service; else ""."""
    while error is not None and not any("/kombu/" in frame for frame in error.stack):
        error = error.cause
    return "" if error is None else f"the Celery broker {broker or '($FRESHNESS_CELERY_BROKER)'} is unreachable: "


def _cause(error: SerializableErrorInfo) -> str:
    """The innermost exception of a chain (what a run failure wraps many times over)."""
    while error.cause is not None:
        error = error.cause
    return short(error.message)


def short(message: str) -> str:
    """Dagster's `module.ClassName: message` of an error as `ClassName: message`."""
    return re.sub(r"^[\w.]+\.(\w+: )", r"\1", message.strip())
