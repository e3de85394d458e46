"""Reciprocal rank fusion of a search's ranked lists (vector and full-text). Pure.

A record's fused score is the sum over the lists it appears in of 1 / (K + rank), rank
from 1 (Cormack, Clarke and Büttcher, SIGIR 2009). Ranks, not scores, are fused: a cosine
similarity and a BM25 score have no common scale, and ranks need no tuning per corpus.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = 60  # the paper's constant: a record ranked first by one list alone does not outrank
#         one ranked a little lower by both
_T = TypeVar("_T", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Fused(Generic[_T]):
    id: _T
    score: float
    ranks: tuple[int | None, ...]  # its rank (from 1) in each list, None where it is absent


def fuse(lists: Sequence[Sequence[_T]], *, k: int = K) -> list[Fused[_T]]:
    """Every id of `lists` (each ranked best first, without repeats), best fused first;
    ties keep the order in which the lists, first to last, first named them."""
    ranks: dict[_T, list[int | None]] = {}
    for at, ids in enumerate(lists):
        for rank, i in enumerate(ids, 1):
            ranks.setdefault(i, [None] * len(lists))[at] = rank
    fused = [Fused(i, sum(1.0 / (k + r) for r in rs if r is not None), tuple(rs)) for i, rs in ranks.items()]
    return sorted(fused, key=lambda f: -f.score)
