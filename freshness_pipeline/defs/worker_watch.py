"""What a submitted run's workers do, said on stderr while `freshness run --submit` waits
for the run (`remote._watch` calls `WorkerWatch.look` at every poll). Each is said once:

- a step due (every step it depends on succeeded, as the run's public `stepStats` say) that
  no worker started as long as a heartbeat may be late (`stale_after(runs.beat_s)`), in a
  run on the Celery executor: "vector_index waiting for a worker (queue embeddings)", the
  queue being the step's own tag;
- a step whose heartbeat in the state store (`step_beats`, `pipeline/step_beats.py`) is
  stale: its worker stopped; with when its task comes back (Redis: the visibility timeout
  the run's tags carry; RabbitMQ: when the broker drops the worker's connection) or the
  run's max runtime ends it;
- a step that started again after that (its task came back from the queue).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from ..adapters.damage import DamagedState, SchemaOutdated
from ..adapters.state.store import StateStore
from ..config import Settings, state_url
from ..pipeline.step_beats import silent_for, stale_after
from .executors import BROKER_TAG, CELERY_QUEUE_TAG, DEFAULT_QUEUE, VISIBILITY_TAG

MAX_RUNTIME_TAG = "dagster/max_runtime"  # Dagster's run tag: the run's own max runtime

_PLAN = """query($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run {
      tags { key value }
      executionPlan { steps { key metadata { key value } inputs { dependsOn { key } } } }
    }
    ... on Error { message }
  }
}"""
_STEPS = """query($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { stepStats { stepKey status } }
    ... on Error { message }
  }
}"""

# A GraphQL call: (query, variables, field) -> the field (`remote._GraphQL.field`).
Query = Callable[[str, dict[str, Any], str], dict[str, Any]]
Rows = Callable[[str], dict[str, dict[str, Any]]]  # run id -> step -> its `step_beats` row


class WorkerWatch:
    """One submitted run's workers, looked at once a poll (`look`)."""

    def __init__(
        self,
        query: Query,
        settings: Settings,
        run_id: str,
        source: str | None,
        *,
        rows: Rows | None = None,
        clock: Callable[[], float] = time.time,
        out: TextIO | None = None,
    ) -> None:
        self.query, self.run_id, self.source = query, run_id, source or f"run {run_id}"
        self.beat_s = settings.runs.beat_s
        self.url = state_url(settings)
        self.rows = rows or self._read_rows
        self.clock, self.out = clock, out
        self.tags: dict[str, str] | None = None  # read with the plan, once
        self.plan: dict[str, tuple[str, list[str]]] = {}  # step -> (its queue, the steps it depends on)
        self.due_since: dict[str, float] = {}
        self.said: set[tuple[Any, ...]] = set()

    def look(self) -> None:
        if self.tags is None:
            self._read_plan()
        run = self._run(_STEPS)
        started = {s["stepKey"]: s["status"] for s in run.get("stepStats") or ()}
        now, rows = self.clock(), self.rows(self.run_id)
        self._waiting(started, rows, now)
        for step, row in sorted(rows.items()):
            self._beats(step, row, now)

    def _waiting(self, started: Mapping[str, str | None], rows: Mapping[str, Any], now: float) -> None:
        if BROKER_TAG not in (self.tags or {}):  # not on Celery: no queue to wait in
            return
        for step, (queue, needs) in self.plan.items():
            if started.get(step) is not None or any(started.get(d) != "SUCCESS" for d in needs):
                continue
            since = self.due_since.setdefault(step, now)
            if now - since >= stale_after(self.beat_s) and step not in rows:
                self._say(
                    ("waiting", step),
                    f"{step} waiting for a worker (queue {queue}): submitted to Celery, started by no worker yet",
                )

    def _beats(self, step: str, row: Mapping[str, Any], now: float) -> None:
        holder, starts = row["holder"], int(row["starts"])
        if starts > 1:
            self._say(("restart", step, starts), f"{step} restarted on {holder} (start {starts}): its task came back")
        silent = silent_for(row, now, self.beat_s)
        if silent is not None:
            self._say(
                ("stale", step, holder, starts),
                f"{step} on {holder} stopped heartbeating {silent:.0f} s ago; {self._next(row, now)}",
            )

    def _next(self, row: Mapping[str, Any], now: float) -> str:
        """What ends a step whose worker stopped."""
        tags = self.tags or {}
        runtime = f" ({tags[MAX_RUNTIME_TAG]} s)" if MAX_RUNTIME_TAG in tags else ""
        ends = f"or the run's max runtime{runtime} ends it"
        if VISIBILITY_TAG in tags:
            timeout = float(tags[VISIBILITY_TAG])
            left = max(0.0, float(row["started_at"]) + timeout - now)
            return (
                f"its task comes back when Celery's visibility timeout ({timeout:g} s after its delivery) "
                f"ends, in about {left:.0f} s, {ends}"
            )
        if BROKER_TAG in tags:
            return f"its task comes back once the broker {tags[BROKER_TAG]} drops the worker's connection, {ends}"
        return f"the run's max runtime{runtime} ends it"

    def _say(self, key: tuple[Any, ...], text: str) -> None:
        if key not in self.said:
            self.said.add(key)
            print(f"{self.source}: {text}", file=self.out or sys.stderr, flush=True)

    def _run(self, query: str) -> dict[str, Any]:
        run = self.query(query, {"runId": self.run_id}, "runOrError")
        return run if run["__typename"] == "Run" else {}

    def _read_plan(self) -> None:
        run = self._run(_PLAN)
        self.tags = {t["key"]: t["value"] for t in run.get("tags") or ()}
        for s in (run.get("executionPlan") or {}).get("steps") or ():
            step_tags = {m["key"]: m["value"] for m in s["metadata"]}
            needs = sorted({d["key"] for i in s["inputs"] for d in i["dependsOn"]})
            self.plan[s["key"]] = (step_tags.get(CELERY_QUEUE_TAG, DEFAULT_QUEUE), needs)

    def _read_rows(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's rows in `step_beats`; none from a state database the run has not
        migrated yet, or one this process cannot read (said once)."""
        try:
            store = StateStore(self.url, read_only=True)
        except SchemaOutdated:
            return {}
        except DamagedState as exc:
            self._say(("state",), f"cannot read the steps' heartbeats: {exc}")
            return {}
        try:
            return store.beats.of_run(run_id)
        finally:
            store.close()
