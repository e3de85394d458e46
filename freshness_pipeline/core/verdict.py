"""A source's freshness verdict, decided in one place: `freshness status`, the `source_fresh`
check, the `freshness_alert` check and the `verdicts` frame all call `judge`, so they cannot
disagree. Pure: times in (POSIX seconds, the clock injected), the verdict out.

    fresh    refreshed within its fastest tier's interval, score (when measured) at its alert
    stale    refreshed, but longer ago than that interval, or its score under `checks.freshness_alert`
    never    never refreshed, and no attempt failed
    blocked  its last attempt, after its last success, was blocked by a check
    failed   its last attempt, after its last success, failed or was canceled

The level says how bad: "ok" (passes), "warn", or "error" (once the slowest tier's interval
has passed since the last success; for a source never refreshed, since it became known).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

State = Literal["fresh", "stale", "never", "blocked", "failed"]
Level = Literal["ok", "warn", "error"]


@dataclass(frozen=True, slots=True)
class Verdict:
    source: str
    state: State
    level: Level
    reason: str  # why, in words, without the source's name
    age_s: float | None  # since the last success; None: never refreshed
    warn_after_s: float
    fail_after_s: float
    by_score: bool = False  # stale by its score alone (refreshed in time)

    @property
    def passed(self) -> bool:
        return self.level == "ok"

    @property
    def description(self) -> str:
        return f"{self.source}: {self.reason}"


def judge(
    source: str,
    intervals_s: Mapping[str, float],
    *,
    last_success: float | None,
    attempt: Mapping[str, Any] | None = None,
    known_since: float | None = None,
    score: float | None = None,
    alert_at: float | None = None,
    now: float,
) -> Verdict:
    """The verdict on `source` at `now`.

    `intervals_s`: its tiers' intervals (`core/cadence.intervals`); `last_success`: when its
    last committed refresh finished (None: never); `attempt`: its last attempt (status,
    finished_at, message), counted when it ended after `last_success`; `known_since`: when
    it first became known (a source never refreshed is not late before its first interval);
    `score` and `alert_at`: its latest freshness score and `checks.freshness_alert`."""
    every = [s for s in intervals_s.values() if s > 0]
    warn, fail = (min(every), max(every)) if every else (0.0, 0.0)
    window = f"WARN after {_duration(warn)}, ERROR after {_duration(fail)}"
    age = None if last_success is None else max(0.0, now - last_success)

    def out(state: State, level: Level, reason: str, by_score: bool = False) -> Verdict:
        return Verdict(source, state, level, reason, age, warn, fail, by_score)

    def late(since: float) -> Level:
        return "ok" if not every or since < warn else ("error" if since >= fail else "warn")

    unsuccessful = attempt is not None and attempt.get("status") not in (None, "success")
    if attempt is not None and unsuccessful and (last_success is None or attempt["finished_at"] > last_success):
        status = str(attempt["status"])
        state: State = "blocked" if status == "blocked" else "failed"
        how = "was blocked" if status == "blocked" else ("was canceled" if status == "canceled" else "failed")
        since = (
            f"the index is as of the last success, {_utc(last_success)}"
            if last_success is not None
            else "nothing was ever indexed"
        )
        why = f": {attempt['message']}" if attempt.get("message") else ""
        level: Level = "error" if age is not None and every and age >= fail else "warn"
        return out(state, level, f"the last refresh ({_utc(attempt['finished_at'])}) {how}{why}; {since}")
    if last_success is None or age is None:
        if known_since is None:
            return out("never", "warn", f"never refreshed ({window})")
        waited = max(0.0, now - known_since)
        return out("never", late(waited), f"never refreshed; known since {_utc(known_since)} ({window})")
    head = f"last refreshed {_utc(last_success)}"
    level = late(age)
    if level == "error":
        return out("stale", level, f"{head}, past its slowest tier's interval {_duration(fail)} (ERROR)")
    if level == "warn":
        return out("stale", level, f"{head}, past its fastest tier's interval {_duration(warn)} ({window})")
    if score is not None and alert_at is not None and score < alert_at:
        return out(
            "stale", "warn", f"{head}; freshness score {score:.3f} under checks.freshness_alert {alert_at:g}", True
        )
    if not every:
        return out("fresh", "ok", f"{head}; its tiers refresh on every tick, no window to judge")
    return out("fresh", "ok", f"{head}, within {_duration(warn)} ({window})")


def _utc(ts: float) -> str:
    """A moment as the check and `status` write it: absolute, so a stored description never
    goes out of date ("31 s ago" would)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _duration(seconds: float) -> str:
    """A duration as people read it: 40 s, 12 min, 3.5 h."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.3g} h"
