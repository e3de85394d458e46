"""What a refresh run did, in its own record (`run_outcomes`, keyed by Dagster's run id): its
steps write it as they go (`defs/assets.py`, `defs/step_endings.py`), and whoever reports
the run reads it beside the run's status, which Dagster's public API gives (`outcome`):
`freshness run` in-process and `--submit`, the run status sensors, `freshness status` and
the `runs()` frame. Whether the commit landed is the `runs` row written with the run id in
the commit's own transaction; the record only repeats it.

The record's `facts`:

    crawl        the crawl's counts: crawled, errors, skipped
    pages        the pages to review (errors, flagged, skipped): url -> why, the first `SHOWN`
    section_errors  the pages whose text could not be segmented: url -> why, the first `SHOWN`
    warnings     the crawl's and the sections' warnings (quarantine holds among them)
    checks       the checks that did not pass: name, severity, description
    blocked      the blocking checks among them that failed at ERROR: their step stopped the run
    errors       each step's own error, "step: Class: message"
    interrupted  a step was interrupted (a Ctrl-C or a SIGTERM reached its process)
    running      the steps started and not ended (`vector_index` only)
    committed    vector_index's commit landed
    seconds      the run's work, discovery to commit (`IndexReport`'s `seconds`)
    message      what the run's reader said of it when the run ended
"""

from __future__ import annotations

import time
from typing import Any

from ..adapters.state.store import StateStore, migrate
from ..config import Settings, state_url
from .crawl import CrawlReport
from .ports import State

SHOWN = 20  # pages of each kind in an outcome
INDEX_STEP = "vector_index"  # the step that commits
RUNNING, SUCCESS, BLOCKED, FAILURE = "running", "success", "blocked", "failure"
OUTSIDE = "run FAILURE outside its steps"  # a failure no step of the run recorded
UNRECORDED = (  # a run that succeeded with no record here: its steps wrote to another state store
    "no record of this run in the state store this command reads: its steps wrote theirs to another "
    "($FRESHNESS_STATE_URL, else the sources file's `state_url`, must be the deployment's)"
)


def note(
    store: State,
    run_id: str,
    source: str,
    *,
    status: str | None = None,
    tier: str | None = None,
    facts: dict[str, Any] | None = None,
    append: dict[str, list[Any]] | None = None,
    drop: dict[str, Any] | None = None,
) -> None:
    """Merge into the run's record (`RunLog.update_run`)."""
    columns = {k: v for k, v in (("status", status), ("tier", tier)) if v is not None}
    store.runs.update_run(run_id, source, columns, facts=facts, append=append, drop=drop, started_at=time.time())


def started(store: State, run_id: str, source: str, tier: str | None) -> None:
    """The run's first step began; `tier`: the tier it fetches (None: every page)."""
    note(store, run_id, source, status=RUNNING, tier=tier or "all")


def crawled(store: State, run_id: str, report: CrawlReport) -> None:
    pages = {kind: dict(sorted(found.items())[:SHOWN]) for kind, found in report.pages_to_review().items()}
    counts = {k: n for k, n in report.page_counts().items() if k != "flagged"}  # the run line's, before the plan
    note(store, run_id, report.source, facts={"crawl": counts, "pages": pages}, append={"warnings": report.warnings})


def sectioned(store: State, run_id: str, source: str, warnings: list[str], errors: dict[str, str]) -> None:
    """The section stage's warnings, and its pages in error (shown with the crawl's)."""
    facts = {"section_errors": dict(sorted(errors.items())[:SHOWN])}
    note(store, run_id, source, facts=facts, append={"warnings": warnings})


def indexing(store: State, run_id: str, source: str) -> None:
    note(store, run_id, source, append={"running": [INDEX_STEP]})


def indexed(store: State, run_id: str, source: str, seconds: float) -> None:
    """vector_index's commit landed; `seconds`: the run's work, discovery to commit."""
    facts = {"committed": True, "seconds": seconds}
    note(store, run_id, source, status=SUCCESS, facts=facts, drop={"running": INDEX_STEP})


def check_failed(
    store: State, run_id: str, source: str, name: str, severity: str, description: str | None, *, blocking: bool
) -> None:
    """A check that did not pass; `blocking`: it stops its step's run (a blocking check at ERROR)."""
    check = {"name": name, "severity": severity, "description": description}
    append: dict[str, list[Any]] = {"checks": [check], **({"blocked": [name]} if blocking else {})}
    note(store, run_id, source, status=BLOCKED if blocking else None, append=append)


def step_failed(store: State, run_id: str, source: str, step: str, error: str, *, interrupted: bool) -> None:
    """Step `step` raised `error` ("Class: message"); `interrupted`: a Ctrl-C or SIGTERM did."""
    facts = {"interrupted": True} if interrupted else None
    errors = {"errors": [f"{step}: {error}"]}
    note(store, run_id, source, status=FAILURE, facts=facts, append=errors, drop={"running": step})


def outcome(
    run_id: str, status: str, record: dict[str, Any] | None, commit: dict[str, Any] | None, cause: str | None = None
) -> dict[str, Any]:
    """What `freshness run` returns of run `run_id`, from Dagster's run `status` ("SUCCESS",
    "FAILURE", "CANCELED", …), its `record` and its `commit` (`RunLog.committed`): `status`
    (success | blocked | failure), `message`, the counts (the commit's, else the
    crawl's), the checks that did not pass, the pages to review, and `committed` when a run
    that did not succeed committed all the same. A canceled run is a failure whose message
    says so. `cause`: why the run failed where no step recorded an error, as its reader
    found it (the run's failure reason in Dagster, a broker out of reach)."""
    facts = (record or {}).get("facts") or {}
    out: dict[str, Any] = {"run_id": run_id}
    if commit is not None:
        out |= dict(commit["counts"]) | {"reindex_reason": commit.get("reason")}
        out |= {"seconds": facts["seconds"]} if "seconds" in facts else {}
    else:
        out |= facts.get("crawl") or {}
    if "pages" in facts:
        pages = facts["pages"]
        pages["errors"] = {**(pages.get("errors") or {}), **(facts.get("section_errors") or {})}
        for kind, key in (("skipped", "skipped_pages"), ("errors", "error_pages"), ("flagged", "flagged_pages")):
            out[key] = dict(sorted((pages.get(kind) or {}).items())[:SHOWN])
        out["warnings"] = list(facts.get("warnings") or [])
    checks = [{**c, "passed": False} for c in facts.get("checks") or []]
    out["checks"] = checks
    if status == "SUCCESS":
        return {**out, "status": SUCCESS} | ({"warnings": [UNRECORDED]} if record is None else {})
    blocked = [c for c in checks if c["name"] in (facts.get("blocked") or [])]
    if blocked and commit is None:
        message = "; ".join(f"{c['name']}: {c['description'] or 'failed'}" for c in blocked)
        return {**out, "status": BLOCKED, "message": message}
    message = "; ".join(facts.get("errors") or []) or cause or _unexplained(status)
    if status == "CANCELED" and facts.get("errors"):
        message += "; run CANCELED"
    if commit is not None:
        out["committed"] = True
        message += " (its commit had landed: the counts above are indexed)"
    elif INDEX_STEP in (facts.get("running") or []):
        message += (
            f"; {INDEX_STEP} was still running in its worker when the run ended: it does not commit "
            "for a run that ended"
        )
    return {**out, "status": FAILURE, "message": message}


def _unexplained(status: str) -> str:
    if status == "FAILURE":
        return f"{OUTSIDE}: no step recorded an error (the run's events in the Dagster UI say why)"
    return f"run {status}"


def read(settings: Settings, source: str, run_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Run `run_id`'s record and its commit (None: none), from the settings' state store (brought
    to the newest schema first: a run that failed before its first step never migrated it)."""
    url = state_url(settings)
    migrate(url)
    store = StateStore(url, read_only=True)
    try:
        return store.runs.run_record(run_id), store.runs.committed(source, run_id)
    finally:
        store.close()


def is_unexplained(record: dict[str, Any] | None) -> bool:
    """No step of the run recorded an error or a block: it failed outside its steps."""
    facts = (record or {}).get("facts") or {}
    return not facts.get("errors") and not facts.get("blocked")
