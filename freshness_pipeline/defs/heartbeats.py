"""`beating`: a refresh step's body, run under its heartbeat (`pipeline/step_beats.py`) in
the state store, every `runs.beat_s` of the sources file. A step that finds the row of an
earlier start of itself that never ended (its worker stopped; Celery handed its task out
again) says so once in the run's events, as a warning, before it does anything else."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import dagster as dg

from ..pipeline.step_beats import heartbeat, restart_note, this_process
from .resources import FreshnessResource

Step = TypeVar("Step", bound=Callable[..., Any])


def beating(*, migrate: bool = False) -> Callable[[Step], Step]:
    """The asset body `step` (a function or a generator, with the `freshness` resource) with
    its heartbeat; `migrate`: the run's first step brings the state database to the newest
    schema first (the heartbeat's table is in it)."""

    def wrap(step: Step) -> Step:
        name = step.__name__  # the asset's op: its step key

        if inspect.isgeneratorfunction(step):

            @functools.wraps(step)
            def steps(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any) -> Iterator[Any]:
                with _beat(context, kwargs["freshness"], name, migrate):
                    yield from step(context, *args, **kwargs)

            return steps  # type: ignore[return-value]

        @functools.wraps(step)
        def call(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any) -> Any:
            with _beat(context, kwargs["freshness"], name, migrate):
                return step(context, *args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


@contextmanager
def _beat(context: dg.AssetExecutionContext, freshness: FreshnessResource, step: str, migrate: bool) -> Iterator[None]:
    if migrate:
        freshness.migrate()
    settings = freshness.settings()
    beat_s, holder = settings.runs.beat_s, this_process()
    with heartbeat(freshness.store(settings).beats, context.run.run_id, step, beat_s=beat_s, holder=holder) as before:
        if before is not None:
            context.log.warning(restart_note(step, holder, before, time.time(), beat_s))
        yield
