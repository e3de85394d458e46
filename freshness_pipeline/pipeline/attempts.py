"""Each source's last refresh attempt, whatever its outcome and however it was launched: a
failed or blocked run commits nothing to the run log, so without this `freshness status`
would show the previous success as if nothing had happened since. The entry point records
every refresh it runs, the run failure sensor every failed one of the UI or a sensor, and
every run that committed is in the run log: the latest of the two is the last attempt."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..adapters.state.store import StateStore, migrate
from ..config import Settings, state_url
from .faults import crash_point


def latest_attempt(
    attempt: Mapping[str, Any] | None, last_success: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The source's last attempt: the recorded one, unless a run committed after it (a run of
    the UI, a sensor or a backfill, which no command recorded)."""
    if last_success is None or (attempt is not None and attempt["finished_at"] >= last_success["finished_at"]):
        return attempt
    return {
        "run_id": last_success["run_id"],
        "finished_at": last_success["finished_at"],
        "status": "success",
        "message": None,
    }


def record_attempt(settings: Settings, name: str, outcome: Mapping[str, Any]) -> None:
    """Keep a refresh's outcome (`run_record.outcome`) as the source's last attempt, and as
    how its run ended in the run's record (its status, when, the message). The store is
    brought to the newest schema first: a run that failed before its first step never
    migrated it."""
    url = state_url(settings)
    crash_point("attempt")
    migrate(url)
    store = StateStore(url)
    now, run_id = time.time(), outcome.get("run_id")
    status, message = str(outcome.get("status") or "failure"), outcome.get("message")
    try:
        store.runs.record_attempt(name, {"run_id": run_id, "finished_at": now, "status": status, "message": message})
        if run_id is not None:
            store.runs.update_run(
                run_id, name, {"status": status, "finished_at": now}, facts={"message": message}, started_at=now
            )
    finally:
        store.close()


def committed(settings: Settings, name: str, run_id: str) -> dict[str, Any] | None:
    """The commit Dagster run `run_id` made for source `name` (its counts, when), or None:
    what a run that failed, was canceled or was interrupted after its commit really did."""
    url = state_url(settings)
    migrate(url)
    store = StateStore(url, read_only=True)
    try:
        return store.runs.committed(name, run_id)
    finally:
        store.close()
