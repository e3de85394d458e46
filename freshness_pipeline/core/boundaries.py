"""Where a section over the token budget is cut: content-defined boundaries between its
units (paragraphs, list items, table rows, code blocks). Pure.

The idea of content-defined chunking (rsync, restic's chunker, FastCDC), applied to a
section's units instead of a file's bytes: whether a cut follows a unit depends on that
unit's own fingerprint (of its words: markup and list numbers move no cut), never on its
distance from the section's start. An inserted row then changes the first-level group that
holds it, and at most one neighbour, instead of shifting every later boundary.

- A unit ends a *run* when its fingerprint, read as a fraction of 2**64, is below its
  share of the target size (`ends_run`): runs average `target` tokens whatever the units'
  sizes, and a boundary is decided by one unit alone.
- A run under `min_tokens` joins the next one (the last run joins the one before): no
  chunk of a row or two. Each decision reads one run, so an edit in a run can merge it
  with, or split it from, its next neighbour only.
- A group of runs over the budget is cut the same way with half the target (and half the
  minimum), down to single units: content-defined at every level, nothing packed greedily.

The bound for chunks: an edit replaces only chunks of the (at most two, adjacent) groups it
changes; every other chunk keeps its text. It cannot be one neighbour for chunks as well:
the budget forces cuts inside a group that no first-level cut ends, so a new first-level
cut there can make two groups that fit, and all the chunks the group was cut into are
replaced by those two (three or more; `test_boundaries.py` has one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

__all__ = ["ends_run", "fingerprint", "spans"]

_FULL = 1 << 64


def fingerprint(words: str) -> int:
    """64-bit fingerprint of a unit's words (its plain text: no markup, no list marker)."""
    return int.from_bytes(hashlib.blake2b(words.strip().encode(), digest_size=8).digest(), "big")


def ends_run(fp: int, tokens: int, target: float) -> bool:
    """Whether a unit of `tokens` tokens with fingerprint `fp` ends a run of about `target`
    tokens: true for a share `tokens / target` of all fingerprints."""
    return fp < _FULL * tokens / target


Fits = Callable[[int, int], bool]  # whether units [start, end) fit the budget as one chunk


def spans(
    fps: Sequence[int], sizes: Sequence[int], fits: Fits, target: float, min_tokens: float
) -> list[tuple[int, int]]:
    """The chunks of units with fingerprints `fps` and token `sizes` (each at least 1) as
    [start, end) spans that cover them in order; every span `fits` or is one unit."""
    return _spans(fps, sizes, fits, 0, len(fps), target, min_tokens)


def _spans(
    fps: Sequence[int], sizes: Sequence[int], fits: Fits, lo: int, hi: int, target: float, min_tokens: float
) -> list[tuple[int, int]]:
    groups: list[tuple[int, int]] = []
    start, group, run = lo, 0, 0
    for i in range(lo, hi):
        run += sizes[i]
        if i + 1 < hi and not ends_run(fps[i], sizes[i], target):
            continue
        group += run
        if run >= min_tokens:
            groups.append((start, i + 1))
            start, group = i + 1, 0
        run = 0
    if start < hi:  # short runs at the end join the group before
        groups.append((groups.pop()[0] if groups and group < min_tokens else start, hi))
    out: list[tuple[int, int]] = []
    for a, b in groups:
        if b - a == 1 or fits(a, b):
            out.append((a, b))
        else:
            out += _spans(fps, sizes, fits, a, b, target / 2, min_tokens / 2)
    return out
