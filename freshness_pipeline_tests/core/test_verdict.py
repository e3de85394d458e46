"""One verdict per source (`core/verdict.py`), on an injected clock: never, fresh, stale,
blocked, failed (a canceled run too), and the score's alert."""

from __future__ import annotations

from freshness_pipeline.core.verdict import judge

HOUR = 3600.0
EVERY = {"hot": 2 * HOUR, "warm": 6 * HOUR, "cold": 24 * HOUR}
T0 = 1_800_000_000.0


def test_a_source_never_refreshed_is_never_and_not_late_before_its_first_interval() -> None:
    first = judge("docs", EVERY, last_success=None, known_since=T0, now=T0 + 60)
    assert (first.state, first.level, first.passed) == ("never", "ok", True)
    assert first.reason.startswith("never refreshed")
    assert judge("docs", EVERY, last_success=None, known_since=T0, now=T0 + 3 * HOUR).level == "warn"
    assert judge("docs", EVERY, last_success=None, known_since=T0, now=T0 + 25 * HOUR).level == "error"
    unknown = judge("docs", EVERY, last_success=None, now=T0)  # nothing says since when: not an ERROR
    assert (unknown.state, unknown.level) == ("never", "warn")


def test_a_refreshed_source_is_fresh_then_stale_by_its_cadence() -> None:
    fresh = judge("docs", EVERY, last_success=T0, now=T0 + HOUR)
    assert (fresh.state, fresh.level, fresh.age_s) == ("fresh", "ok", HOUR)
    assert "ago" not in fresh.reason and "UTC" in fresh.reason  # absolute, never "31 s ago"
    late = judge("docs", EVERY, last_success=T0, now=T0 + 3 * HOUR)
    assert (late.state, late.level) == ("stale", "warn")
    very = judge("docs", EVERY, last_success=T0, now=T0 + 24 * HOUR)
    assert (very.state, very.level) == ("stale", "error") and "slowest tier" in very.reason


def test_a_blocked_failed_or_canceled_attempt_after_the_last_success_is_not_fresh() -> None:
    for status, state, words in [
        ("blocked", "blocked", "was blocked: change_spike"),
        ("failure", "failed", "failed: change_spike"),
        ("canceled", "failed", "was canceled: change_spike"),
    ]:
        attempt = {"status": status, "finished_at": T0 + 60, "message": "change_spike"}
        v = judge("docs", EVERY, last_success=T0, attempt=attempt, now=T0 + 120)
        assert (v.state, v.level, v.passed) == (state, "warn", False), v
        assert words in v.reason and "the index is as of the last success" in v.reason
    # An attempt before the last success is history.
    old = {"status": "blocked", "finished_at": T0 - 60, "message": "x"}
    assert judge("docs", EVERY, last_success=T0, attempt=old, now=T0 + 120).state == "fresh"
    only = judge("docs", EVERY, last_success=None, attempt=old, now=T0)
    assert only.state == "blocked" and "nothing was ever indexed" in only.reason


def test_a_score_under_its_alert_is_stale_by_score() -> None:
    v = judge("docs", EVERY, last_success=T0, score=0.9, alert_at=0.95, now=T0 + 60)
    assert (v.state, v.level, v.by_score) == ("stale", "warn", True)
    assert judge("docs", {}, last_success=T0, score=0.96, alert_at=0.95, now=T0).passed
