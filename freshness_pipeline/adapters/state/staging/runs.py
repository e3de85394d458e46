"""Which runs have staging, and which of their stages finished (`staged_runs`).

A run's staging is opened by its crawl (`begin`, which drops every other run's of the
source); each later stage requires the one before it to have finished (`require`) and
clears what it staged itself before, when it runs again (`restart`)."""

from __future__ import annotations

import time
from enum import StrEnum

from sqlalchemy import Engine, Table, delete, select, update

from .. import schema
from ..dialect import insert_ignore_rows


class Stage(StrEnum):
    """The stages that stage work, in run order (also the columns of `staged_runs`)."""

    CRAWL = "crawl"
    SECTIONS = "sections"
    PLAN = "plan"


STAGES = tuple(Stage)
_TABLES: tuple[Table, ...] = (
    schema.staged_extracts,
    schema.staged_page_rows,
    schema.staged_pages,
    schema.staged_sections,
    schema.staged_plan,
    schema.staged_events,
    schema.staged_redirects,
    schema.staged_runs,
)
# What each stage writes (a stage that runs again first clears its own rows and the later ones').
_WRITES = {
    Stage.CRAWL: (schema.staged_extracts, schema.staged_page_rows),
    Stage.SECTIONS: (schema.staged_pages, schema.staged_sections),
    Stage.PLAN: (schema.staged_plan, schema.staged_events, schema.staged_redirects),
}


class StagingGone(RuntimeError):
    """The staged work a stage needs is not there (a later run started, or it was committed)."""


def rerun_hint(source: str) -> str:
    """What to run when a stage's input is gone or out of date: the whole refresh of the
    source, since every stage reads what the one before it staged in the same run."""
    return (
        f"run the whole refresh of the source instead (the refresh job for partition {source!r}, "
        f"or `freshness run --source {source}`), not one of its assets"
    )


class StagedRuns:
    """A run's staging as a whole (`StateStore.staged_runs`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def begin(self, source: str, run_id: str, stage: Stage) -> None:
        """Open `run_id`'s staging for `stage` (kept when it is open already: then what this
        stage and the later ones staged before is cleared) and drop every other run's."""
        with self.engine.begin() as conn:
            for t in _TABLES:
                conn.execute(delete(t).where(t.c.source == source, t.c.run_id != run_id))
            row = {"source": source, "run_id": run_id, "started_at": time.time()}
            insert_ignore_rows(conn, schema.staged_runs, [row])
        self.restart(source, run_id, stage)

    def restart(self, source: str, run_id: str, stage: Stage) -> None:
        """Clear what `stage` and the stages after it staged for `run_id` (a step run again)."""
        later = STAGES[STAGES.index(stage) :]
        with self.engine.begin() as conn:
            for name in later:
                for t in _WRITES[name]:
                    conn.execute(delete(t).where(t.c.source == source, t.c.run_id == run_id))
            r = schema.staged_runs
            cleared: dict[str, None] = {n.value: None for n in later}
            if stage is Stage.CRAWL:
                cleared["template_blocks"] = None
            conn.execute(update(r).where(r.c.source == source, r.c.run_id == run_id).values(cleared))

    def finish(self, source: str, run_id: str, stage: Stage) -> None:
        """Record that `stage` staged all its work for `run_id`."""
        r = schema.staged_runs
        done = {stage.value: {"finished_at": time.time()}}
        with self.engine.begin() as conn:
            conn.execute(update(r).where(r.c.source == source, r.c.run_id == run_id).values(done))

    def require(self, source: str, run_id: str, stage: Stage) -> None:
        """Raises `StagingGone` (in one line naming what to run instead) unless `stage`
        finished staging its work for `run_id` and that work is still there."""
        r = schema.staged_runs
        with self.engine.connect() as conn:
            q = select(r.c[stage.value]).where(r.c.source == source, r.c.run_id == run_id)
            finished = conn.execute(q).scalar()
        if finished is None:
            raise StagingGone(
                f"source {source!r}: what run {run_id}'s {stage} stage staged is gone (a later run of "
                f"the source started, or this one committed it); {rerun_hint(source)}"
            )

    def drop(self, source: str, run_id: str) -> None:
        with self.engine.begin() as conn:
            for t in _TABLES:
                conn.execute(delete(t).where(t.c.source == source, t.c.run_id == run_id))
