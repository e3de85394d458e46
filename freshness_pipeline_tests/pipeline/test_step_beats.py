"""A step's heartbeat in `step_beats`, on SQLite and Postgres, with an injected clock: its row
from start to end, beats from its thread, staleness from `runs.beat_s`, and the note a
start says when it finds the row an earlier start of the step left behind; the rows of killed
runs forgotten a week on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.beats import FORGET_AFTER_S
from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.pipeline.step_beats import STALE_BEATS, heartbeat, restart_note, silent_for, utc

RUN = "run-1"
BEAT_S = 10.0


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(any_state_url: str) -> Iterator[StateStore]:
    migrate(any_state_url)
    s = StateStore(any_state_url)
    yield s
    s.close()


def test_staleness_is_the_missed_beats_of_the_setting() -> None:
    row = {"beat_at": 100.0}
    assert silent_for(row, 100.0 + STALE_BEATS * BEAT_S, BEAT_S) is None
    assert silent_for(row, 100.0 + STALE_BEATS * BEAT_S + 1, BEAT_S) == STALE_BEATS * BEAT_S + 1
    assert silent_for(row, 100.0 + STALE_BEATS * 2.0 + 1, 2.0) == STALE_BEATS * 2.0 + 1


def test_a_step_beats_while_it_runs_and_its_row_goes_when_it_ends(store: StateStore) -> None:
    clock = Clock()
    beat_s = 0.02  # the thread's own period; what it writes is the injected clock's time
    with heartbeat(store.beats, RUN, "vector_index", beat_s=beat_s, clock=clock, holder="a pid 1") as previous:
        assert previous is None
        row = store.beats.of_run(RUN)["vector_index"]
        assert (row["holder"], row["starts"], row["started_at"], row["beat_at"]) == ("a pid 1", 1, clock.now, clock.now)
        clock.now += 5
        deadline = time.monotonic() + 500 * beat_s
        while store.beats.of_run(RUN)["vector_index"]["beat_at"] != clock.now:
            assert time.monotonic() < deadline, "the heartbeat thread never beat"
            time.sleep(beat_s)
    assert store.beats.of_run(RUN) == {}


def test_a_step_that_raises_ends_its_row_too(store: StateStore) -> None:
    with pytest.raises(RuntimeError), heartbeat(store.beats, RUN, "diff_plan", beat_s=BEAT_S, holder="a pid 1"):
        raise RuntimeError("boom")
    assert store.beats.of_run(RUN) == {}


def test_a_start_that_finds_a_stopped_workers_row_says_its_task_came_back(store: StateStore) -> None:
    clock = Clock()
    store.beats.start(RUN, "vector_index", "worker-1 pid 7", clock())  # its worker is killed: no end
    stopped_at = clock.now
    clock.now += STALE_BEATS * BEAT_S + 30
    with heartbeat(store.beats, RUN, "vector_index", beat_s=BEAT_S, clock=clock, holder="worker-2 pid 9") as previous:
        assert previous is not None and previous["holder"] == "worker-1 pid 7"
        note = restart_note("vector_index", "worker-2 pid 9", previous, clock(), BEAT_S)
        assert note == (
            "vector_index restarted (start 2) on worker-2 pid 9: its previous worker worker-1 pid 7 stopped "
            f"heartbeating at {utc(stopped_at)} without ending the step; Celery redelivered its task"
        )
        row = store.beats.of_run(RUN)["vector_index"]
        assert (row["holder"], row["starts"]) == ("worker-2 pid 9", 2)
        # The old holder, were it alive after all, touches the new start's row no more.
        store.beats.beat(RUN, "vector_index", "worker-1 pid 7", clock.now + 1)
        store.beats.end(RUN, "vector_index", "worker-1 pid 7")
        assert store.beats.of_run(RUN)["vector_index"]["beat_at"] == clock.now
    assert store.beats.of_run(RUN) == {}


def test_a_start_soon_after_the_last_beat_says_so_without_calling_the_worker_stopped(store: StateStore) -> None:
    clock = Clock()
    store.beats.start(RUN, "vector_index", "worker-1 pid 7", clock())
    clock.now += BEAT_S  # RabbitMQ hands the task out as the dead worker's connection drops
    previous = store.beats.start(RUN, "vector_index", "worker-2 pid 9", clock())
    assert previous is not None
    assert restart_note("vector_index", "worker-2 pid 9", previous, clock(), BEAT_S) == (
        "vector_index restarted (start 2) on worker-2 pid 9: its previous worker worker-1 pid 7 last beat at "
        f"{utc(clock.now - BEAT_S)}, 10 s ago, without ending the step; Celery redelivered its task, as it does "
        "when a worker is lost (or, on Redis, when a step outlives the visibility timeout)"
    )


def test_the_rows_of_killed_runs_are_forgotten_at_a_later_start(store: StateStore) -> None:
    clock = Clock()
    store.beats.start("killed-long-ago", "fetched_pages", "worker-1 pid 7", clock())
    clock.now += FORGET_AFTER_S / 2
    store.beats.start("killed-lately", "vector_index", "worker-1 pid 8", clock())
    clock.now += FORGET_AFTER_S / 2 + 1
    with heartbeat(store.beats, RUN, "diff_plan", beat_s=BEAT_S, clock=clock, holder="worker-2 pid 9"):
        assert store.beats.of_run("killed-long-ago") == {}
        assert set(store.beats.of_run("killed-lately")) == {"vector_index"}  # still read by --submit
        assert set(store.beats.of_run(RUN)) == {"diff_plan"}


def test_a_start_skips_the_silent_rows_another_transaction_holds(pg_state_url: str) -> None:
    """On Postgres, steps of several runs start at once (Celery): a start's pruning passes the
    rows another transaction has locked instead of waiting for them."""
    migrate(pg_state_url)
    store = StateStore(pg_state_url)
    try:
        clock = Clock()
        store.beats.start("killed", "fetched_pages", "worker-1 pid 7", clock())
        clock.now += FORGET_AFTER_S + 1
        t = schema.step_beats
        with store.engine.connect() as other, other.begin():
            other.execute(select(t).where(t.c.run_id == "killed").with_for_update()).all()
            started = threading.Thread(target=store.beats.start, args=(RUN, "diff_plan", "w pid 9", clock()))
            started.start()
            started.join(60)  # a start that waited would wait until this block ends
            assert not started.is_alive(), "the start waited for a row another transaction holds"
        assert set(store.beats.of_run(RUN)) == {"diff_plan"}
        assert set(store.beats.of_run("killed")) == {"fetched_pages"}  # the next start's to forget
    finally:
        store.close()
