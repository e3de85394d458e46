"""A payload update: metadata rewritten in place, the vector kept, no embedding.

LanceDB on disk; Pinecone through the real SDK (`update(id=..., set_metadata=...)`)
against the local stand-in (not Pinecone)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.adapters.vectorstores.lancedb_store import LanceDBStore, table_name
from freshness_pipeline.adapters.vectorstores.pinecone_store import PineconeStore
from freshness_pipeline_tests.standins.pinecone_standin import PineconeStandIn

DIM = 8
KEY = "pc-test-key-not-a-secret"


def records(n: int) -> list[VectorRecord]:
    rng = np.random.default_rng(n)
    return [
        VectorRecord(
            f"p{i}:0",
            rng.standard_normal(DIM).tolist(),
            {
                "url": f"https://d.test/p{i}",
                "key": f"p{i}",
                "heading_path": "Guide > Intro",
                "content_hash": f"h{i}",
                "text": f"See [the guide](https://d.test/old{i}).",
                "title": "Guide",
                "as_of": "2025-01",
                "source": "docs",
                "chunk_index": 0,
                "fetched_at": 1.0,
                "index_version": 1,
                "custom": "kept",
            },
        )
        for i in range(n)
    ]


def update(i: int) -> dict:
    return {
        "text": f"See [the guide](https://d.test/new{i}).",
        "title": "Guide v2",
        "as_of": "2025-01",
        "fetched_at": 2.0,
    }


def test_lancedb_updates_columns_and_keeps_vectors(tmp_path: Path) -> None:
    store = LanceDBStore(tmp_path / "v")
    recs = records(3)
    store.upsert("docs", recs)
    store.update_metadata("docs", {"p1:0": update(1), "missing:0": update(9)})

    rows = {r["id"]: r for r in store.records("docs")}
    assert set(rows) == {"p0:0", "p1:0", "p2:0"}  # an unknown id is not created
    assert rows["p1:0"]["text"] == "See [the guide](https://d.test/new1)." and rows["p1:0"]["title"] == "Guide v2"
    assert rows["p1:0"]["custom"] == "kept" and rows["p1:0"]["content_hash"] == "h1"
    assert rows["p0:0"] == {**rows["p0:0"], "text": recs[0].metadata["text"], "title": "Guide"}
    hit = store.query("docs", recs[1].vector, k=1)[0]
    assert hit.id == "p1:0" and hit.score == pytest.approx(1.0, abs=1e-5)  # same vector


def test_lancedb_table_from_before_the_payload_columns_gets_them(tmp_path: Path) -> None:
    db = lancedb.connect(str(tmp_path / "v"))
    old = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("vector", pa.list_(pa.float32(), DIM))])
    db.create_table(table_name("docs"), schema=old).add(
        pa.table(
            {"id": ["p0:0"], "vector": pa.FixedSizeListArray.from_arrays(pa.array([0.5] * DIM, pa.float32()), DIM)},
            schema=old,
        )
    )
    store = LanceDBStore(tmp_path / "v")
    store.update_metadata("docs", {"p0:0": update(0)})
    (row,) = store.records("docs")
    assert (row["title"], row["as_of"], row["text"]) == ("Guide v2", "2025-01", update(0)["text"])


@pytest.fixture
def standin() -> Iterator[PineconeStandIn]:
    with PineconeStandIn(dimension=DIM, api_key=KEY) as server:
        yield server


def test_pinecone_update_sets_metadata_through_the_sdk(standin: PineconeStandIn) -> None:
    store = PineconeStore(KEY, standin.host, max_backoff=0.05)
    recs = records(2)
    store.upsert("docs", recs)
    before = standin.namespaces["docs"]["p1:0"][0].copy()
    store.update_metadata("docs", {"p1:0": {**update(1), "title": None}})

    sent = [r.json() for r in standin.requests if r.path == "/vectors/update"]
    assert sent == [{"id": "p1:0", "namespace": "docs", "setMetadata": {**update(1), "title": ""}}]
    values, meta = standin.namespaces["docs"]["p1:0"]
    assert np.array_equal(values, before) and meta["text"] == update(1)["text"]
    assert meta["title"] == "" and meta["custom"] == "kept"  # set_metadata never clears a key
    assert not any(r.path == "/vectors/upsert" for r in standin.requests[2:])
