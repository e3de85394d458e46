"""Each source's freshness verdict (`core/verdict.py`) from the state store: its last
success, its last attempt (`attempts.py`) and its latest score. What `freshness status`,
the `source_fresh` check and its sensor, and the `verdicts` frame show. Reads only."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import closing

from ..adapters.state.store import StateStore
from ..config import Settings, Source, state_url
from ..core.cadence import intervals
from ..core.verdict import Verdict, judge
from .attempts import latest_attempt
from .ports import State


def source_verdict(
    store: State, source: Source, *, known_since: float | None = None, now: float | None = None
) -> Verdict:
    """`source`'s verdict at `now` (default: the clock); `known_since`: when it became known
    (a source never refreshed is not late before its first interval)."""
    runs = store.runs.recent(source.name, limit=1)
    last = runs[0] if runs else None
    measured = store.metrics.history(source.name, 1)
    return judge(
        source.name,
        intervals(source.tiers.cadence()),
        last_success=float(last["finished_at"]) if last else None,
        attempt=latest_attempt(store.runs.last_attempt(source.name), last),
        known_since=known_since,
        score=measured[-1]["score"] if measured else None,
        alert_at=source.checks.freshness_alert,
        now=time.time() if now is None else now,
    )


def verdicts(
    settings: Settings,
    names: list[str] | None = None,
    *,
    known_since: Mapping[str, float] | None = None,
    now: float | None = None,
) -> dict[str, Verdict]:
    """Source -> verdict, for `names` (default: every source of the file)."""
    seen = known_since or {}
    with closing(StateStore(state_url(settings), read_only=True)) as store:
        return {
            name: source_verdict(store, settings.source(name), known_since=seen.get(name), now=now)
            for name in ([s.name for s in settings.sources] if names is None else names)
        }
