"""`map_in_flight`: every item once, the window as wide as an idle process allows and one
worker when it is CPU-bound, errors to the reader, and no worker left when the reader stops."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from freshness_pipeline.adapters.in_flight import InFlight, map_in_flight
from freshness_pipeline.core.in_flight import epoch

BOUND_S = 60.0  # how long a barrier waits before it fails the test: a bound, not a measure


def fetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fetch ")]


def test_every_item_once_in_completion_order() -> None:
    first_done = threading.Event()

    def slow_first(i: int) -> int:
        if i == 0:
            first_done.wait(BOUND_S)  # item 0 ends only after item 1 has
        elif i == 1:
            first_done.set()
        return i * 10

    out = list(map_in_flight(slow_first, list(range(12)), InFlight(4, ahead=2, cpu=lambda: 0.0)))
    assert sorted(out) == [i * 10 for i in range(12)]
    assert out.index(10) < out.index(0)
    assert fetch_threads() == []


def test_an_idle_process_keeps_the_whole_window_in_flight() -> None:
    """Each call waits until four are running at once: the barrier breaks, and the test
    fails, if the window ever admits fewer."""
    together = threading.Barrier(4, timeout=BOUND_S)

    def call(i: int) -> int:
        together.wait()
        return i

    window = InFlight(4, ahead=1, cpu=lambda: 0.0)  # no CPU spent: the process only waits
    assert sorted(map_in_flight(call, list(range(40)), window)) == list(range(40))
    assert window.size == 4


def test_a_cpu_bound_process_narrows_to_one_worker() -> None:
    clock = itertools.count()
    cpu = (2 * t for t in itertools.count())  # two CPU seconds a second: the interpreter never idles
    window = InFlight(4, ahead=4, cpu=lambda: float(next(cpu)), clock=lambda: float(next(clock)))
    lock, running, seen = threading.Lock(), [0], []

    def call(i: int) -> int:
        with lock:
            running[0] += 1
            seen.append(running[0])
        time.sleep(0.001)  # long enough for a wider window to overlap
        with lock:
            running[0] -= 1
        return i

    assert sorted(map_in_flight(call, list(range(60)), window)) == list(range(60))
    assert window.size == 1
    narrowed = epoch(4) + epoch(2) + 4  # the epochs that halve 4 to 1, and the items still out then
    assert set(seen[narrowed:]) == {1}, seen


def test_an_error_reaches_the_reader_and_the_workers_end() -> None:
    def call(i: int) -> int:
        if i == 5:
            raise ValueError("page 5 is broken")
        return i

    with pytest.raises(ValueError, match="page 5"):
        list(map_in_flight(call, list(range(20)), InFlight(3, ahead=2, cpu=lambda: 0.0)))
    assert fetch_threads() == []


def test_a_reader_that_stops_early_stops_every_worker() -> None:
    taken = []

    def call(i: int) -> int:
        taken.append(i)
        return i

    answers = map_in_flight(call, list(range(1000)), InFlight(4, ahead=2, cpu=lambda: 0.0))
    next(answers)
    answers.close()
    assert fetch_threads() == []
    assert len(taken) <= 4 * 2 + 1, "workers ran ahead of a reader that took one"
