"""Progress of the long stages (discovery, fetch/extract, embed), one call per stage:

    discovery = progress.call("discovery", fetcher.discover, unit="URLs", count=lambda d: len(d.urls))
    for res in progress.track(fetcher.fetch(targets), "fetch/extract", total=len(targets), unit="pages"):
    for hashes in progress.batches(missing, batch, "embed", unit="sections"):

On a terminal a rich bar with the count, the rate and the elapsed time. Every stage also
logs one line when it ends: inside a Dagster step through Dagster's logger, so it lands in
the run's event log; without a terminal that line is all there is, and the CLI's stderr
gets it too (cron logs). Dagster points a step's stderr at its compute log, so the CLI
calls `attach` before a run starts, to keep the stderr it was started with.
`FRESHNESS_PROGRESS=bar|log|off` overrides the choice ("off": no bar, no line).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TextIO, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

T = TypeVar("T")
MODE_ENV = "FRESHNESS_PROGRESS"
_terminal: TextIO | None = None  # where bars go, when the command was started on a terminal
_lines: TextIO | None = None  # where a stage's line goes, when it was started without one
_logger = logging.getLogger(__name__)  # where a stage's line is logged (`log_to`)


def attach() -> None:
    """Keep a handle on this process's stderr (a copy of its descriptor) before Dagster
    redirects stderr to a step's compute log: the bars' terminal, or where lines go."""
    global _terminal, _lines
    if _terminal is not None or _lines is not None:
        return
    try:
        copy = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
    except (AttributeError, OSError, ValueError):  # stderr is not a file (tests capture it)
        return
    if _isatty(copy):
        _terminal = copy
    else:
        _lines = copy


def mode() -> str:
    """ "bar" (and a log line), "log" or "off"."""
    chosen = os.environ.get(MODE_ENV, "").strip().lower()
    if chosen in ("bar", "log", "off"):
        return chosen
    return "bar" if _terminal is not None or _isatty(sys.stderr) else "log"


def _console() -> Console:
    return Console(file=_terminal or sys.stderr)


def track(
    items: Iterable[T],
    stage: str,
    *,
    total: int | None = None,
    unit: str = "items",
    count: Callable[[T], int] | None = None,
) -> Iterator[T]:
    """Yield `items`, showing how many of `total` went by; `count(item)` says how many
    units one item stands for (a batch of sections), else 1. Nothing is shown for an
    empty stage."""
    chosen = mode()
    if chosen == "off" or total == 0:
        yield from items
        return
    started, done = time.monotonic(), 0
    bar = _Bar(stage, total, unit) if chosen == "bar" else None
    try:
        for item in items:
            yield item
            step = count(item) if count else 1
            done += step
            if bar:
                bar.advance(step)
    finally:
        if bar:
            bar.close()
        _log(summary(stage, done, unit, time.monotonic() - started))


def batches(items: Sequence[T], size: int, stage: str, *, unit: str) -> Iterator[Sequence[T]]:
    """`items` in slices of `size`, counted as they go by."""
    slices = (items[i : i + size] for i in range(0, len(items), size))
    yield from track(slices, stage, total=len(items), unit=unit, count=len)


def call(stage: str, fn: Callable[[], T], *, unit: str, count: Callable[[T], int]) -> T:
    """`fn()` under a spinner (on a terminal); then one line: how many `unit` it found."""
    chosen = mode()
    started = time.monotonic()
    if chosen != "bar":
        result = fn()
    else:
        console = _console()
        with console.status(f"{stage}..."):
            result = fn()
    line = summary(stage, count(result), unit, time.monotonic() - started)
    if chosen == "bar":
        console.print(line, highlight=False)
    if chosen != "off":
        _log(line)
    return result


def summary(stage: str, done: int, unit: str, seconds: float) -> str:
    rate = f", {done / seconds:.1f} {unit}/s" if seconds > 0 and done else ""
    return f"{stage}: {done} {unit} in {seconds:.1f}s{rate}"


class _Bar:
    def __init__(self, stage: str, total: int | None, unit: str) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            _RateColumn(),
            TimeElapsedColumn(),
            console=_console(),
        )
        self._task = self._progress.add_task(stage, total=total, unit=unit)
        self._progress.start()

    def advance(self, step: int) -> None:
        self._progress.advance(self._task, step)

    def close(self) -> None:
        self._progress.stop()


class _RateColumn(ProgressColumn):
    """Units a second, from rich's own speed estimate."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.1f} {task.fields['unit']}/s")


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


def log_to(logger: logging.Logger) -> None:
    """Send the stages' lines to `logger`: `defs/` passes Dagster's, which writes the run's
    event log (this module stays free of Dagster)."""
    global _logger
    _logger = logger


def _log(line: str) -> None:
    """Inside a Dagster step, Dagster's logger (the run's event log); else this module's.
    Without a terminal, the attached stderr too."""
    if _lines is not None:
        print(line, file=_lines)
    _logger.info(line)
