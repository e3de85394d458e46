"""Fault injection for the crash tests: `FRESHNESS_CRASH_AT=<point>[:<n>]` makes the
process SIGKILL itself at the n-th pass of a named point of the commit protocol (see
`CRASH_POINTS`); `FRESHNESS_CRASH_SIGNAL=INT` sends itself a SIGINT there instead (a Ctrl-C
at that moment). A no-op when the variable is unset."""

from __future__ import annotations

import os
import signal
from collections import Counter

CRASH_ENV = "FRESHNESS_CRASH_AT"
SIGNAL_ENV = "FRESHNESS_CRASH_SIGNAL"  # KILL (unset) or INT
CRASH_POINTS = ("recovered", "intents", "embed", "upsert", "payload", "delete", "verified", "committed", "dropped")
_passes: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """SIGKILL (or $FRESHNESS_CRASH_SIGNAL) at the n-th pass of `name` when
    $FRESHNESS_CRASH_AT is `name[:n]`."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    _passes[name] += 1
    point, _, nth = spec.partition(":")
    if point == name and _passes[name] == int(nth or 1):
        os.kill(os.getpid(), signal.Signals[f"SIG{os.environ.get(SIGNAL_ENV) or 'KILL'}"])
