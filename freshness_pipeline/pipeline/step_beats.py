"""A refresh step's heartbeat, so that a step whose worker stopped is seen.

`heartbeat` writes the step's row in `step_beats` when the step starts ("host pid N", its
`starts` one more than a row an earlier start left behind) and beats it every
`runs.beat_s` from a daemon thread until the step ends, which deletes the row. A step with
no beat for `STALE_BEATS` beats has lost its process (a Celery worker killed mid-step):
`freshness run --submit` says so (`defs/worker_watch.py`), and when the broker hands the
step's task out again, the new start finds the row left behind and the run's events say
why the step started twice (`restart_note`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .ports import Beats

STALE_BEATS = 3  # beats missed before a step's process counts as stopped

log = logging.getLogger(__name__)
Clock = Callable[[], float]


def this_process() -> str:
    """A step's holder: the host and process executing it."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def stale_after(beat_s: float) -> float:
    return STALE_BEATS * beat_s


def silent_for(row: Mapping[str, Any], now: float, beat_s: float) -> float | None:
    """Seconds since the row's last beat when that is past `stale_after`; None while it beats."""
    silent = now - float(row["beat_at"])
    return silent if silent > stale_after(beat_s) else None


def utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def restart_note(step: str, holder: str, previous: Mapping[str, Any], now: float, beat_s: float) -> str:
    """What the run's events say when `step` starts on `holder` and finds the row `previous`
    left behind by an earlier start that never ended."""
    last = float(previous["beat_at"])
    said = (
        f"{step} restarted (start {int(previous['starts']) + 1}) on {holder}: its previous worker {previous['holder']}"
    )
    if silent_for(previous, now, beat_s) is not None:
        return f"{said} stopped heartbeating at {utc(last)} without ending the step; Celery redelivered its task"
    # Too soon to call it stopped: RabbitMQ redelivers as the worker's connection drops.
    return (
        f"{said} last beat at {utc(last)}, {now - last:.0f} s ago, without ending the step; Celery redelivered "
        "its task, as it does when a worker is lost (or, on Redis, when a step outlives the visibility timeout)"
    )


@contextmanager
def heartbeat(
    beats: Beats, run_id: str, step: str, *, beat_s: float, clock: Clock = time.time, holder: str | None = None
) -> Iterator[Mapping[str, Any] | None]:
    """Beat `step` of `run_id` while the block runs; yields the row an earlier start of the
    step left behind (None: its first start)."""
    holder = holder or this_process()
    previous = beats.start(run_id, step, holder, clock())
    stop = threading.Event()
    thread = threading.Thread(
        target=_beat, args=(beats, run_id, step, holder, beat_s, clock, stop), name=f"beat {step}", daemon=True
    )
    thread.start()
    try:
        yield previous
    finally:
        stop.set()
        thread.join()
        beats.end(run_id, step, holder)


def _beat(
    beats: Beats, run_id: str, step: str, holder: str, beat_s: float, clock: Clock, stop: threading.Event
) -> None:
    failing = False
    while not stop.wait(beat_s):
        try:
            beats.beat(run_id, step, holder, clock())
            failing = False
        except Exception as exc:  # a database hiccup must not end the step; said once per spell
            if not failing:
                log.warning(f"{step}: its heartbeat could not be written: {exc}")
            failing = True
