from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from freshness_pipeline.adapters.damage import DamagedState
from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.adapters.vectorstores.lancedb_store import LanceDBStore, table_name


def _records(n: int, dim: int = 16, seed: int = 0, prefix: str = "r") -> list[VectorRecord]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return [
        VectorRecord(
            f"https://docs.example/{prefix}{i}#intro:0",
            vectors[i].tolist(),
            {
                "url": f"https://docs.example/{prefix}{i}",
                "key": f"{prefix}{i}#intro",
                "heading_path": ("Guide", f"Part {i}"),
                "content_hash": f"hash-{seed}-{i}",
                "text": f"text of {prefix}{i}",
                "source": "docs",
                "chunk_index": 0,
                "fetched_at": 1_700_000_000.5,
                "index_version": 2,
                "page_date": "2024-05",
            },
        )
        for i in range(n)
    ]


@pytest.fixture
def store(tmp_path: Path) -> LanceDBStore:
    return LanceDBStore(tmp_path / "vectors")


def test_round_trip_keeps_metadata_and_extra_keys(store: LanceDBStore) -> None:
    records = _records(5)
    store.upsert("docs@v2", records)

    assert store.list_hashes("docs@v2") == {r.id: r.metadata["content_hash"] for r in records}
    dumped = {row["id"]: row for row in store.records("docs@v2")}
    first = dumped[records[0].id]
    assert "vector" not in first
    assert first["heading_path"] == "Guide > Part 0"
    assert first["chunk_index"] == 0 and first["index_version"] == 2
    assert first["fetched_at"] == 1_700_000_000.5
    assert first["page_date"] == "2024-05"  # from the `extra` JSON column


def test_query_is_cosine_similarity(store: LanceDBStore) -> None:
    records = _records(50)
    store.upsert("docs", records)

    hits = store.query("docs", records[7].vector, k=3)

    assert [h.id for h in hits][0] == records[7].id
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].score >= hits[1].score >= hits[2].score
    assert hits[0].metadata["key"] == records[7].metadata["key"]
    opposite = store.query("docs", [-x for x in records[7].vector], k=50)[-1]
    assert opposite.id == records[7].id and opposite.score == pytest.approx(-1.0, abs=1e-5)


def test_upsert_overwrites_by_id_and_last_write_wins(store: LanceDBStore) -> None:
    store.upsert("docs", _records(10, seed=1))
    newer = _records(10, seed=2)
    store.upsert("docs", [*newer[:3], *newer[:3]])

    hashes = store.list_hashes("docs")
    assert len(hashes) == 10
    assert [hashes[r.id] for r in newer[:3]] == [f"hash-2-{i}" for i in range(3)]
    assert hashes[newer[5].id] == "hash-1-5"


def test_delete_quotes_ids_and_ignores_unknown(store: LanceDBStore) -> None:
    odd = VectorRecord('it\'s a "quoted" id', [1.0] * 16, {"content_hash": "q"})
    store.upsert("docs", [*_records(3), odd])

    store.delete("docs", [odd.id, "no-such-id", "x') OR ('1'='1"])
    store.delete("missing-namespace", ["a"])

    assert set(store.list_hashes("docs")) == {r.id for r in _records(3)}


def test_namespaces_are_separate_tables(store: LanceDBStore) -> None:
    store.upsert("docs@v1", _records(2, prefix="a"))
    store.upsert("docs_v1", _records(3, prefix="b"))

    assert table_name("docs@v1") != table_name("docs_v1")
    assert len(store.list_hashes("docs@v1")) == 2
    assert len(store.list_hashes("docs_v1")) == 3

    store.drop_namespace("docs@v1")
    store.drop_namespace("docs@v1")
    assert store.list_hashes("docs@v1") == {}
    assert list(store.records("docs@v1")) == []
    assert store.query("docs@v1", [1.0] * 16, k=3) == []
    assert len(store.list_hashes("docs_v1")) == 3


def test_dimension_is_fixed_per_namespace(store: LanceDBStore) -> None:
    store.upsert("docs", _records(2, dim=16))
    with pytest.raises(ValueError, match="16-d"):
        store.upsert("docs", _records(2, dim=8))


def test_eighty_thousand_records(store: LanceDBStore) -> None:
    records = _records(80_000, dim=32)
    store.upsert("big", records)

    hashes = store.list_hashes("big")
    assert len(hashes) == 80_000
    store.delete("big", [r.id for r in records[:2_500]])  # more than one delete batch
    assert len(store.list_hashes("big")) == 77_500
    assert store.query("big", records[-1].vector, k=1)[0].id == records[-1].id


def test_committed_readers_see_the_marked_version(store: LanceDBStore) -> None:
    recs = _records(3)
    ids = [r.id for r in recs]
    store.upsert("docs", recs[:2])
    assert len(list(store.records("docs", committed=True))) == 2  # never marked: the latest
    store.mark_committed("docs")
    store.upsert("docs", recs[2:])  # a run's writes in flight
    store.delete("docs", ids[:1])
    assert {r["id"] for r in store.records("docs", committed=True)} == set(ids[:2])
    assert set(store.list_hashes("docs", committed=True)) == set(ids[:2])
    assert {h.id for h in store.query("docs", recs[2].vector, 10, committed=True)} == set(ids[:2])
    assert set(store.list_hashes("docs")) == set(ids[1:])  # writers see the latest
    store.mark_committed("docs")
    assert set(store.list_hashes("docs", committed=True)) == set(ids[1:])
    store.mark_committed("docs")  # idempotent


def test_a_damaged_table_is_named_and_can_be_dropped(store: LanceDBStore) -> None:
    store.upsert("docs", _records(3))
    folder = store.path / f"{table_name('docs')}.lance"
    for data in (folder / "data").glob("*.lance"):
        data.unlink()
    damaged = rf"vector table {folder} is damaged \(a data file is missing: {folder}/data/"
    with pytest.raises(DamagedState, match=damaged):
        store.list_hashes("docs")
    store.drop_namespace("docs")
    assert not folder.exists() and store.list_hashes("docs") == {}
    store.upsert("docs", _records(2))
    assert len(store.list_hashes("docs")) == 2


def _merges(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the `merge_insert` calls of every LanceDB table."""
    from lancedb.table import LanceTable

    calls: list[int] = []
    real = LanceTable.merge_insert

    def counted(self: LanceTable, on: str):  # noqa: ANN202 - LanceDB's builder
        calls.append(1)
        return real(self, on)

    monkeypatch.setattr(LanceTable, "merge_insert", counted)
    return calls


def test_a_new_namespace_takes_its_records_as_appends(store: LanceDBStore, monkeypatch: pytest.MonkeyPatch) -> None:
    merges = _merges(monkeypatch)
    for part in range(3):  # a first run's upserts, call after call
        store.upsert("docs", _records(5, prefix=f"p{part}-"))
    assert merges == []  # no join against the table: each call was an append
    assert len(store.list_hashes("docs")) == 15

    again = _records(5, seed=9, prefix="p1-")  # an id written before: exact upsert semantics
    store.upsert("docs", again)
    hashes = store.list_hashes("docs")
    assert len(merges) == 1 and len(hashes) == 15
    assert hashes[again[0].id] == "hash-9-0"


def test_appends_stop_once_another_writer_touched_the_table(
    store: LanceDBStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    merges = _merges(monkeypatch)
    store.upsert("docs", _records(3))
    other = LanceDBStore(tmp_path / "vectors")  # another process, say: this store never saw its writes
    newer = _records(6, seed=4)
    other.upsert("docs", newer[3:])  # the table was not empty for it: it merges
    store.upsert("docs", newer[3:])  # not appended twice: the version moved past this store's write
    hashes = store.list_hashes("docs")
    assert len(hashes) == 6 and len(merges) == 2
    assert LanceDBStore(tmp_path / "vectors").list_hashes("docs") == hashes


def test_a_store_opened_on_a_filled_namespace_merges(store: LanceDBStore, tmp_path: Path) -> None:
    store.upsert("docs", _records(4))
    reopened = LanceDBStore(tmp_path / "vectors")  # the next run, after a kill mid-write
    reopened.upsert("docs", _records(4, seed=3))
    hashes = reopened.list_hashes("docs")
    assert len(hashes) == 4 and set(hashes.values()) == {f"hash-3-{i}" for i in range(4)}
