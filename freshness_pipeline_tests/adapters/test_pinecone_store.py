"""PineconeStore through the real `pinecone` SDK against the local stand-in."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import numpy as np
import pytest
from pinecone import Pinecone
from pinecone.errors.exceptions import (
    PayloadTooLargeError,
    ServiceError,
    UnauthorizedError,
)

from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.adapters.vectorstores.pinecone_store import PineconeStore
from freshness_pipeline_tests.standins import pinecone_standin as limits
from freshness_pipeline_tests.standins.pinecone_standin import PineconeStandIn

DIM = 8
KEY = "pc-test-key-not-a-secret"


@pytest.fixture(autouse=True)
def sdk_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The SDK's own retry waits, recorded instead of slept (its documented test seam)."""
    slept: list[float] = []
    monkeypatch.setattr("pinecone._internal.http_client._retry_sleep", slept.append)
    return slept


@pytest.fixture
def standin() -> Iterator[PineconeStandIn]:
    with PineconeStandIn(dimension=DIM, api_key=KEY, hang_s=3.0) as server:
        yield server


@pytest.fixture
def store(standin: PineconeStandIn) -> PineconeStore:
    return PineconeStore(KEY, standin.host, max_backoff=0.05)


def _records(n: int, *, text: str = "body", dim: int = DIM) -> list[VectorRecord]:
    rng = np.random.default_rng(n)
    return [
        VectorRecord(
            f"https://docs.example/p{i}#intro:0",
            rng.standard_normal(dim).tolist(),
            {
                "url": f"https://docs.example/p{i}",
                "key": f"p{i}#intro",
                "heading_path": ["Guide", "Intro"],
                "content_hash": f"h{i}",
                "text": text,
                "source": "docs",
                "chunk_index": 0,
                "fetched_at": 1_700_000_000.25,
                "index_version": 3,
            },
        )
        for i in range(n)
    ]


def _upserts(standin: PineconeStandIn) -> list[dict]:
    return [r.json() for r in standin.requests if r.path == "/vectors/upsert"]


def test_round_trip(store: PineconeStore, standin: PineconeStandIn) -> None:
    records = _records(20)
    store.upsert("docs", records)

    assert store.list_hashes("docs") == {r.id: f"h{i}" for i, r in enumerate(records)}
    row = next(r for r in store.records("docs") if r["id"] == records[0].id)
    assert row["heading_path"] == "Guide > Intro"
    assert row["chunk_index"] == 0 and isinstance(row["chunk_index"], int)
    assert row["index_version"] == 3 and isinstance(row["index_version"], int)
    hits = store.query("docs", records[4].vector, k=3)
    assert hits[0].id == records[4].id and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].metadata["key"] == "p4#intro"


def test_upserts_are_batched_by_count(store: PineconeStore, standin: PineconeStandIn) -> None:
    store.upsert("docs", _records(2_050))

    assert [len(b["vectors"]) for b in _upserts(standin)] == [100] * 20 + [50]
    assert standin.count("docs") == 2_050


def test_upserts_are_batched_by_bytes(standin: PineconeStandIn) -> None:
    store = PineconeStore(KEY, standin.host, batch_size=1000)
    store.upsert("docs", _records(300, text="é" * 15_000))  # ~30 KB of metadata each

    sizes = [len(r.raw) for r in standin.requests if r.path == "/vectors/upsert"]
    assert len(sizes) > 1 and max(sizes) <= limits.MAX_REQUEST_BYTES
    assert standin.count("docs") == 300


def test_oversized_metadata_text_is_truncated_and_flagged(store: PineconeStore, standin: PineconeStandIn) -> None:
    text = 'naïve "quoted" line\n' * 5_000  # ~100 KB, with JSON escapes and multi-byte chars
    record = _records(1, text=text)[0]
    store.upsert("docs", [record])

    _, stored = standin.namespaces["docs"][record.id]
    assert stored is not None
    assert stored["text_truncated"] is True
    assert text.startswith(stored["text"]) and len(stored["text"]) > 20_000
    assert len(json.dumps(stored, ensure_ascii=False).encode()) <= limits.MAX_METADATA_BYTES
    assert _records(1)[0].metadata.get("text_truncated") is None


def test_retries_through_429_and_5xx(store: PineconeStore, standin: PineconeStandIn, sdk_sleeps: list[float]) -> None:
    # More failures in a row than the SDK retries on its own: our backoff takes over.
    standin.faults.extend([("vectors/upsert", 429)] * 2 + [("vectors/upsert", 503)] * 5)
    standin.faults.extend([("vectors/list", 500), ("vectors/fetch", 502), ("query", 429)])

    store.upsert("docs", _records(10))
    assert len(store.list_hashes("docs")) == 10
    assert store.query("docs", _records(10)[0].vector, k=1)

    assert not standin.faults
    assert len(_upserts(standin)) == 8
    assert sdk_sleeps  # the SDK retried too


def test_timeouts_are_retried(standin: PineconeStandIn) -> None:
    store = PineconeStore(KEY, standin.host, timeout=0.3, max_backoff=0.05)
    store.upsert("docs", _records(3))
    standin.faults.append(("vectors/list", "hang"))

    assert len(store.list_hashes("docs")) == 3


def test_partial_failure_then_retry_converges(standin: PineconeStandIn) -> None:
    store = PineconeStore(KEY, standin.host, max_attempts=2, max_backoff=0.01)
    records = _records(100)
    # The batch half-applies, then the service keeps failing past every retry.
    standin.faults.extend([("vectors/upsert", "partial")] + [("vectors/upsert", 500)] * 10)
    with pytest.raises(ServiceError):
        store.upsert("docs", records)
    assert 0 < standin.count("docs") < 100

    standin.faults.clear()
    store.upsert("docs", records)  # the caller's next run: idempotent by id
    assert store.list_hashes("docs") == {r.id: r.metadata["content_hash"] for r in records}


def test_list_hashes_follows_pagination(store: PineconeStore, standin: PineconeStandIn) -> None:
    store.upsert("docs", _records(250))
    store.upsert("other", _records(5))

    assert len(store.list_hashes("docs")) == 250
    lists = [r for r in standin.requests if r.path == "/vectors/list"]
    assert len(lists) == 3
    assert len(list(store.records("other"))) == 5


def test_delete_batches_and_tolerates_missing(store: PineconeStore, standin: PineconeStandIn) -> None:
    records = _records(2_500)
    store.upsert("docs", records)

    store.delete("docs", [r.id for r in records[:2_400]] + ["never-existed"])
    store.delete("no-such-namespace", ["a", "b"])

    deletes = [r.json() for r in standin.requests if r.path == "/vectors/delete"]
    assert [len(d["ids"]) for d in deletes[:3]] == [1000, 1000, 401]
    assert standin.count("docs") == 100


def test_drop_namespace_is_idempotent(store: PineconeStore, standin: PineconeStandIn) -> None:
    store.upsert("docs", _records(5))
    store.upsert("keep", _records(5))

    store.drop_namespace("docs")
    store.drop_namespace("docs")

    assert store.list_hashes("docs") == {}
    assert standin.count("keep") == 5


def test_wrong_key_fails_fast_and_key_is_never_logged(
    standin: PineconeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(UnauthorizedError):
        PineconeStore("wrong-key", standin.host).upsert("docs", _records(1))
    assert len(standin.requests) == 1  # a 401 is not retried

    standin.faults.append(("vectors/upsert", 503))
    PineconeStore(KEY, standin.host, max_backoff=0.01).upsert("docs", _records(1))
    assert KEY not in caplog.text and "wrong-key" not in caplog.text


def test_standin_enforces_the_service_limits(standin: PineconeStandIn) -> None:
    index = Pinecone(api_key=KEY).Index(host=standin.host)
    vector = {"id": "a", "values": [1.0] * DIM}
    with pytest.raises(Exception, match="maximum is 1000"):
        index.upsert(vectors=[{**vector, "id": f"v{i}"} for i in range(1001)])
    with pytest.raises(PayloadTooLargeError):
        index.upsert(vectors=[{**vector, "id": f"v{i}", "metadata": {"t": "x" * 30_000}} for i in range(80)])
    with pytest.raises(Exception, match="exceeds the limit"):
        index.upsert(vectors=[{**vector, "metadata": {"t": "x" * 41_000}}])
    with pytest.raises(Exception, match="does not match the dimension"):
        index.upsert(vectors=[{**vector, "values": [1.0] * (DIM + 1)}])
    with pytest.raises(Exception, match="non-zero"):
        index.upsert(vectors=[{**vector, "values": [0.0] * DIM}])
    index.upsert(vectors=[vector], namespace="ns")
    with pytest.raises(Exception, match="maximum is 1000"):
        index.delete(ids=[f"v{i}" for i in range(1001)], namespace="ns")
    assert standin.count("ns") == 1 and not standin.namespaces.get("", {})
