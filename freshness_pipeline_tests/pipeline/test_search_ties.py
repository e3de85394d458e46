"""A search ranks tied records by id however many tie at its cut: the store returns which
of them it likes (LanceDB: the order its rows are stored in), and an index refreshed run by
run stores them in another order than a fresh index of the same records (the hashing
embedder's sparse vectors tie often)."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.adapters.vectorstores.lancedb_store import LanceDBStore
from freshness_pipeline.pipeline.search import MODES, Mode, ranked

NS = "docs-v1"
VECTOR = [1.0, 0.0, 0.0, 0.0]


def record(i: int) -> VectorRecord:
    return VectorRecord(
        f"s{i:03d}:0",
        VECTOR,  # one vector and one text for all: every record ties with every other
        {
            "url": f"https://docs.example/p{i}",
            "key": f"s{i:03d}",
            "heading_path": "Guide",
            "content_hash": f"h{i}",
            "text": "Set the timeout.",
            "retrieval_text": "Guide\nSet the timeout.",
        },
    )


def store(path: Path, order: list[int]) -> LanceDBStore:
    lance = LanceDBStore(path)
    for start in range(0, len(order), 20):  # several writes: several fragments
        lance.upsert(NS, [record(i) for i in order[start : start + 20]])
    lance.mark_committed(NS)
    return lance


@pytest.mark.parametrize("mode", MODES)
def test_records_tied_past_the_cut_rank_by_id_in_any_store_order(tmp_path: Path, mode: Mode) -> None:
    ids = list(range(100))
    forward, backward = store(tmp_path / "a", ids), store(tmp_path / "b", ids[::-1])
    got = [
        [r.hit.id for r in ranked(s, NS, "timeout", VECTOR, 5, mode=mode, committed=True)] for s in (forward, backward)
    ]
    assert got[0] == got[1] == [f"s{i:03d}:0" for i in range(5)]
