"""Fault injection for the crash tests: `FRESHNESS_CRASH_AT=<point>[:<n>]` makes the
process SIGKILL itself at the n-th pass of a named point of the commit protocol (see
`CRASH_POINTS`). A no-op when the variable is unset."""

from __future__ import annotations

import os
import signal
from collections import Counter

CRASH_ENV = "FRESHNESS_CRASH_AT"
CRASH_POINTS = ("recovered", "intents", "embed", "upsert", "payload", "delete", "verified", "committed", "dropped")
_passes: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """SIGKILL at the n-th pass of `name` when $FRESHNESS_CRASH_AT is `name[:n]`."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    _passes[name] += 1
    point, _, nth = spec.partition(":")
    if point == name and _passes[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
