"""How many requests a crawl keeps in flight: as many as help, never more than allowed. Pure.

A request costs the crawler some CPU (building it, parsing the answer) and waits on the
server for the rest. Against a far server a request is mostly waiting, and each one more in
flight makes the crawl faster, up to the limit (`fetch.concurrency` per host). Against a
server that answers within a millisecond (the same machine or rack), the crawler's own CPU
is the bottleneck: its threads share one interpreter lock, and each one more in flight only
adds switching (docs/benchmarks.md: 10,000 conditional requests on loopback).

So the window follows the process's CPU share (its CPU seconds per wall second, all threads)
over each epoch of answers, as TCP's congestion window follows losses: above `BUSY` the
process is CPU-bound and the window halves; below `IDLE` it waits on the network and the
window grows by one; between them it holds. It starts at the limit, so a slow site is
crawled at full width from its first request.
"""

from __future__ import annotations

BUSY = 0.9  # CPU seconds per wall second: the interpreter is (nearly) never idle
IDLE = 0.7  # below this the process mostly waits on answers
MIN_EPOCH = 8  # answers between two decisions, at the least


def epoch(size: int) -> int:
    """Answers between two decisions: enough that each request in flight ends about twice."""
    return max(MIN_EPOCH, 2 * size)


def next_size(size: int, limit: int, cpu_s: float, wall_s: float) -> int:
    """The window after an epoch that took `wall_s` and `cpu_s` of the process's CPU."""
    if wall_s <= 0:
        return min(size, limit)
    share = cpu_s / wall_s
    if share > BUSY:
        return max(1, min(size, limit) // 2)
    if share < IDLE:
        return min(limit, size + 1)
    return min(size, limit)
