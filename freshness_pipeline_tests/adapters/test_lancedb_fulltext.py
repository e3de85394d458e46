"""LanceDB's full-text part stays in step with the vectors: rows written after the index
was built are found, deleted and rewritten rows are not (a changed, a removed and a
payload-only record), committed readers see the words of the last commit, and the index
holds exactly the table's rows after each commit (its BM25 statistics count no deleted row)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.adapters.vectorstores.lancedb_store import TEXT_COLUMN, LanceDBStore, table_name

NS = "docs-v1"
DIM = 8


def record(i: int, words: str, *, text: str | None = None) -> VectorRecord:
    vector = np.random.default_rng(i).standard_normal(DIM).astype(np.float32)
    return VectorRecord(
        f"s{i}:0",
        vector.tolist(),
        {
            "url": f"https://docs.example/p{i}",
            "key": f"s{i}",
            "heading_path": "Guide",
            "content_hash": f"h{i}-{words}",
            "text": text or words,
            "retrieval_text": f"Guide\n{words}",
        },
    )


def found(store: LanceDBStore, words: str, *, committed: bool = True) -> list[tuple[str, str]]:
    hits = store.text_query(NS, words, [1.0] * DIM, 10, committed=committed)
    return [(h.id, h.metadata["text"]) for h in hits]


@pytest.fixture
def store(tmp_path: Path) -> LanceDBStore:
    return LanceDBStore(tmp_path / "vectors")


def test_full_text_never_shows_a_changed_removed_or_payload_updated_records_old_text(store: LanceDBStore) -> None:
    store.upsert(NS, [record(1, "zebrafish tuning"), record(2, "narwhal limits"), record(3, "axolotl proxies")])
    store.mark_committed(NS)
    assert found(store, "zebrafish") == [("s1:0", "zebrafish tuning")]

    store.upsert(NS, [record(1, "quokka tuning")])  # changed: new words under the same id
    store.delete(NS, ["s2:0"])  # removed
    store.update_metadata(NS, {"s3:0": {"text": "axolotl [proxies](/new)"}})  # payload only
    store.upsert(NS, [record(4, "wombat retries")])  # written after the index was built
    # Committed readers still see the last commit's words, nothing of these writes.
    assert found(store, "zebrafish") == [("s1:0", "zebrafish tuning")]
    assert found(store, "narwhal") == [("s2:0", "narwhal limits")]
    assert found(store, "quokka wombat") == []

    store.mark_committed(NS)
    for committed in (True, False):
        assert found(store, "zebrafish narwhal", committed=committed) == []
        assert found(store, "quokka", committed=committed) == [("s1:0", "quokka tuning")]
        assert found(store, "axolotl", committed=committed) == [("s3:0", "axolotl [proxies](/new)")]
        assert found(store, "wombat", committed=committed) == [("s4:0", "wombat retries")]


def test_a_hit_carries_its_cosine_similarity_and_its_text_score(store: LanceDBStore) -> None:
    store.upsert(NS, [record(1, "zebrafish tuning"), record(2, "tuning limits")])
    store.mark_committed(NS)
    query = record(1, "").vector
    (best, other) = store.text_query(NS, "zebrafish tuning", query, 5, committed=True)
    assert best.id == "s1:0" and best.score == pytest.approx(1.0, abs=1e-5)  # its own vector
    assert best.text_score is not None and other.text_score is not None and best.text_score > other.text_score
    dense, words = store.hybrid_query(NS, query, "limits", 5, committed=True)
    assert dense[0].id == "s1:0" and [h.id for h in words] == ["s2:0"]


def test_the_words_are_matched_as_given_never_parsed(store: LanceDBStore) -> None:
    store.upsert(NS, [record(1, "the allow-unsafe-pr-checkout option")])
    store.mark_committed(NS)
    for query in ['"allow unsafe"', "allow-unsafe-pr-checkout: AND (NOT)", "checkout*"]:
        assert [i for i, _ in found(store, query)] == ["s1:0"], query
    assert found(store, "???") == []


def test_after_a_commit_the_index_holds_exactly_the_tables_rows(store: LanceDBStore) -> None:
    def stats() -> tuple[int, int, int]:
        table = store._open(NS)
        assert table is not None
        s = table.index_stats(table.list_indices()[0].name)
        assert s is not None
        return s.num_indexed_rows, s.num_unindexed_rows, table.count_rows()

    store.upsert(NS, [record(i, f"word{i} common") for i in range(6)])
    store.mark_committed(NS)
    assert stats() == (6, 0, 6)
    store.upsert(NS, [record(1, "word1 rewritten"), record(7, "word7 common")])
    store.delete(NS, ["s2:0", "s3:0"])
    assert stats()[1] > 0  # before the commit: new rows outside the index, deleted ones in it
    store.mark_committed(NS)
    assert stats() == (5, 0, 5)
    # Scores as a fresh index of the same rows gives them.
    fresh = LanceDBStore(store.path.parent / "fresh")
    fresh.upsert(
        NS,
        [record(i, f"word{i} common") for i in (0, 4, 5)] + [record(1, "word1 rewritten"), record(7, "word7 common")],
    )
    fresh.mark_committed(NS)
    query = [1.0] * DIM
    assert [(h.id, h.text_score) for h in store.text_query(NS, "common word1", query, 5, committed=True)] == [
        (h.id, h.text_score) for h in fresh.text_query(NS, "common word1", query, 5, committed=True)
    ]


def test_a_table_made_before_the_column_gets_its_retrieval_text_at_the_next_commit(store: LanceDBStore) -> None:
    import lancedb

    schema = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), DIM)),
            pa.field("heading_path", pa.string()),
            pa.field("text", pa.string()),
            pa.field("content_hash", pa.string()),
        ]
    )
    db = lancedb.connect(str(store.path))
    db.create_table(
        table_name(NS),
        pa.table(
            {
                "id": ["s1:0"],
                "vector": [[0.5] * DIM],
                "heading_path": ["Guide > Tuning"],
                "text": ["Set the [zebrafish](https://x.example/z) limit."],
                "content_hash": ["h1"],
            },
            schema=schema,
        ),
    )
    assert found(store, "zebrafish") == []  # no full-text part yet: vector search only
    store.mark_committed(NS)
    assert found(store, "zebrafish tuning") == [("s1:0", "Set the [zebrafish](https://x.example/z) limit.")]
    (row,) = store.records(NS)
    assert row[TEXT_COLUMN] == "Guide > Tuning\nSet the zebrafish limit."  # core/retrieval.py: no link target
