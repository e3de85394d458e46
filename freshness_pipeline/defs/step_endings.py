"""How a refresh step ends when it or its run does not go as planned.

- `results_on_failure`: a step that raises (its own error, or the
  `DagsterExecutionInterruptedError` that Dagster raises in a step whose process is
  terminated or gets a Ctrl-C) first reports each check it was to evaluate and had not as
  failed (WARN), naming the error, then raises it again. The check shows that result in the
  run instead of staying planned. The checks of steps that never start stay planned, and
  Dagster resolves them once the run ends: "Execution failed" in a failed run, "Skipped"
  in a canceled one (`AssetCheckExecutionResolvedStatus`).
- `refuse_commit_if_run_ended`: `vector_index` calls it right before its writes become
  visible. A step that outlives its run (a run failed or canceled while its step goes on
  in a Celery worker) then stops there, commits nothing, and the next run converges.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import dagster as dg

from .run_summary import short

Step = TypeVar("Step", bound=Callable[..., Iterator[Any]])
ENDED = (dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.FAILURE)


def results_on_failure(step: Step) -> Step:
    """`step` (an asset's generator body) with a failed result for each of its planned checks
    that it had not evaluated when it raised."""

    @functools.wraps(step)
    def run(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any) -> Iterator[Any]:
        evaluated = set()
        try:
            for event in step(context, *args, **kwargs):
                if isinstance(event, dg.AssetCheckResult):
                    evaluated.add(event.check_name)
                yield event
        except (Exception, dg.DagsterExecutionInterruptedError) as exc:
            error = short(f"{type(exc).__name__}: {exc}").splitlines()[0]
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


def refuse_commit_if_run_ended(context: dg.AssetExecutionContext) -> None:
    """Raise when the step's run is canceling, canceled or failed: its step is not to commit."""
    run = context.instance.get_run_by_id(context.run.run_id)
    if run is not None and run.status in ENDED:
        raise dg.Failure(
            description=f"run {run.run_id} is {run.status.value}: vector_index did not commit "
            "(nothing changed; the next run of the source converges)",
            allow_retries=False,
        )
