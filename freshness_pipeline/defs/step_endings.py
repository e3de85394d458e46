"""How a refresh step ends when it or its run does not go as planned.

- `results_on_failure`: a step that raises (its own error, or the
  `DagsterExecutionInterruptedError` that Dagster raises in a step whose process is
  terminated or gets a Ctrl-C) records its error in the run's record
  (`pipeline/run_record.py`: "step: Class: message", and that it was interrupted), reports
  each check it was to evaluate and had not as failed (WARN), naming the error, then
  raises it again; the check shows that result in the run instead of staying planned.
  Each check of the step that does not pass is recorded before it is yielded, as blocking
  the run when its spec is blocking and it failed at ERROR. The checks of steps that never
  start stay planned, and Dagster resolves them once the run ends: "Execution failed" in a
  failed run, "Skipped" in a canceled one (`AssetCheckExecutionResolvedStatus`).
- `refuse_commit_if_run_ended`: `vector_index` calls it right before its writes become
  visible. A step that outlives its run (a run failed or canceled while its step goes on
  in a Celery worker) then stops there, commits nothing, and the next run converges.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import dagster as dg

from ..pipeline import run_record
from .checks import BLOCKING
from .resources import FreshnessResource

Step = TypeVar("Step", bound=Callable[..., Iterator[Any]])
ENDED = (dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.FAILURE)


def results_on_failure(step: Step) -> Step:
    """`step` (an asset's generator body) with a failed result for each of its planned checks
    that it had not evaluated when it raised."""

    @functools.wraps(step)
    def run(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any) -> Iterator[Any]:
        evaluated = set()
        record = _Record(context, kwargs["freshness"])
        try:
            for event in step(context, *args, **kwargs):
                if isinstance(event, dg.AssetCheckResult):
                    evaluated.add(event.check_name)
                    if not event.passed:
                        record.check(event)
                yield event
        except (Exception, dg.DagsterExecutionInterruptedError) as exc:
            message = f"{type(exc).__name__}: {exc}".strip()
            record.failed(message, interrupted=isinstance(exc, dg.DagsterExecutionInterruptedError))
            error = message.splitlines()[0]
            for key in sorted(context.selected_asset_check_keys, key=lambda k: k.name):
                if key.name not in evaluated:
                    yield dg.AssetCheckResult(
                        asset_key=key.asset_key,
                        check_name=key.name,
                        passed=False,
                        severity=dg.AssetCheckSeverity.WARN,
                        description=f"not evaluated: {context.op_def.name} failed before it: {error}",
                    )
            raise

    return run  # type: ignore[return-value]


class _Record:
    """The step's writes to its run's record. On a step that fails, the record is written as
    far as the state store lets it (a store that cannot be opened is said in the step's log):
    the step's own error is raised all the same."""

    def __init__(self, context: dg.AssetExecutionContext, freshness: FreshnessResource) -> None:
        self.context, self.freshness = context, freshness
        self.run_id, self.source = context.run.run_id, context.partition_key

    def check(self, result: dg.AssetCheckResult) -> None:
        severity = result.severity.value
        blocking = result.check_name in BLOCKING and severity == dg.AssetCheckSeverity.ERROR.value
        name, store = str(result.check_name), self.freshness.store(self.freshness.settings())
        run_record.check_failed(store, self.run_id, self.source, name, severity, result.description, blocking=blocking)

    def failed(self, error: str, *, interrupted: bool) -> None:
        step = self.context.op_def.name
        try:
            store = self.freshness.store(self.freshness.settings())
            run_record.step_failed(store, self.run_id, self.source, step, error, interrupted=interrupted)
        except Exception as exc:
            self.context.log.warning(f"{step}: its error was not recorded in the state store: {exc}")


def refuse_commit_if_run_ended(context: dg.AssetExecutionContext) -> None:
    """Raise when the step's run is canceling, canceled or failed: its step is not to commit."""
    run = context.instance.get_run_by_id(context.run.run_id)
    if run is not None and run.status in ENDED:
        raise dg.Failure(
            description=f"run {run.run_id} is {run.status.value}: vector_index did not commit "
            "(nothing changed; the next run of the source converges)",
            allow_retries=False,
        )
