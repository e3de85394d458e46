"""How long a source that keeps failing waits before its next retry. Pure.

The first failure is retried at the next sensor tick; from the second failure in a row the
wait doubles from the tick interval (10 min, 20 min, 40 min, ...), never beyond the cadence
of the tier the retry is for: a source down for a day is tried about once per cadence, not
288 times.
"""

from __future__ import annotations

TICK_S = 300.0  # tier_cadence_sensor's interval


def retry_wait(failures: int, cadence_s: float, tick_s: float = TICK_S) -> float:
    """Seconds to wait after the latest of `failures` consecutive failed refreshes."""
    if failures <= 1:
        return 0.0
    return min(tick_s * 2.0 ** (failures - 1), max(cadence_s, tick_s))
