"""The heartbeats of the steps that are executing (`step_beats`): one row per (run, step)
from the step's start to its end; a row left behind is a step whose process stopped. Such a
row is forgotten once it has not beaten for `FORGET_AFTER_S`, at the next start of any step,
so the rows of killed runs do not pile up."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, delete, select, tuple_, update

from . import schema

# Long past any use: `freshness run --submit` reads the rows of runs in flight, and a step's
# task that comes back (Celery's redelivery, at most the broker's visibility timeout) reads
# its own. A row of a step still executing beats every `runs.beat_s`.
FORGET_AFTER_S = 7 * 24 * 3600.0


class StepBeats:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def start(self, run_id: str, step: str, holder: str, now: float) -> dict[str, Any] | None:
        """`holder` starts `step` of `run_id` at `now`: its row, `starts` one more than the
        row left by an earlier start that never ended, which is returned (None: the first).
        Rows silent for `FORGET_AFTER_S` go."""
        t = schema.step_beats
        key = (t.c.run_id == run_id) & (t.c.step == step)
        with self.engine.begin() as conn:
            # Rows another start is deleting are skipped: two starts never wait on each other.
            silent = select(t.c.run_id, t.c.step).where(t.c.beat_at < now - FORGET_AFTER_S)
            conn.execute(delete(t).where(tuple_(t.c.run_id, t.c.step).in_(silent.with_for_update(skip_locked=True))))
            row = conn.execute(select(t).where(key).with_for_update()).first()
            previous = None if row is None else row._asdict()
            values = {"holder": holder, "started_at": now, "beat_at": now}
            if previous is None:
                conn.execute(t.insert(), [{"run_id": run_id, "step": step, "starts": 1, **values}])
            else:
                conn.execute(update(t).where(key).values(starts=previous["starts"] + 1, **values))
        return previous

    def beat(self, run_id: str, step: str, holder: str, now: float) -> None:
        """`holder` still executes the step (a later start by another holder is not touched)."""
        t = schema.step_beats
        with self.engine.begin() as conn:
            conn.execute(
                update(t).where(t.c.run_id == run_id, t.c.step == step, t.c.holder == holder).values(beat_at=now)
            )

    def end(self, run_id: str, step: str, holder: str) -> None:
        t = schema.step_beats
        with self.engine.begin() as conn:
            conn.execute(delete(t).where(t.c.run_id == run_id, t.c.step == step, t.c.holder == holder))

    def of_run(self, run_id: str) -> dict[str, dict[str, Any]]:
        """Step -> its row, for the steps of `run_id` that started and did not end."""
        t = schema.step_beats
        with self.engine.connect() as conn:
            return {r.step: r._asdict() for r in conn.execute(select(t).where(t.c.run_id == run_id))}
