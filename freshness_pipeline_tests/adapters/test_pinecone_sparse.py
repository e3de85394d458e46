"""Pinecone's full-text part, through the real `pinecone` SDK against the local stand-in:
sparse values of each record's retrieval text, written and deleted with its vector, so a
sparse query never finds a changed, removed or payload-updated record's old words; without
`vector_store.sparse` (a cosine index) there is no full-text part and nothing is sent."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.adapters.vectorstores.pinecone_store import PineconeStore
from freshness_pipeline.core import sparse
from freshness_pipeline.pipeline.search import ranked
from freshness_pipeline_tests.standins.pinecone_standin import PineconeStandIn

DIM = 8
KEY = "pc-sparse-key-not-a-secret"
NS = "docs-v1"


def record(i: int, words: str, *, text: str | None = None) -> VectorRecord:
    vector = np.random.default_rng(i).standard_normal(DIM)
    return VectorRecord(
        f"s{i}:0",
        (vector / np.linalg.norm(vector)).tolist(),
        {
            "url": f"https://docs.example/p{i}",
            "key": f"s{i}",
            "text": text or words,
            "retrieval_text": f"Guide\n{words}",
        },
    )


@pytest.fixture
def standin() -> Iterator[PineconeStandIn]:
    with PineconeStandIn(dimension=DIM, api_key=KEY, metric="dotproduct") as server:
        yield server


def found(store: PineconeStore, words: str) -> list[tuple[str, str]]:
    return [(h.id, h.metadata["text"]) for h in store.text_query(NS, words, record(9, "").vector, 10)]


def test_sparse_values_follow_every_write_of_their_record(standin: PineconeStandIn) -> None:
    store = PineconeStore(KEY, standin.host, sparse=True)
    store.upsert(NS, [record(1, "zebrafish tuning"), record(2, "narwhal limits"), record(3, "axolotl proxies")])
    assert found(store, "zebrafish") == [("s1:0", "zebrafish tuning")]
    assert "retrieval_text" not in standin.namespaces[NS]["s1:0"][1]  # sent as sparse values only

    store.upsert(NS, [record(1, "quokka tuning")])
    store.delete(NS, ["s2:0"])
    store.update_metadata(NS, {"s3:0": {"text": "axolotl [proxies](/new)", "retrieval_text": "Guide\naxolotl proxies"}})
    assert found(store, "zebrafish narwhal") == []
    assert found(store, "quokka") == [("s1:0", "quokka tuning")]
    assert found(store, "axolotl") == [("s3:0", "axolotl [proxies](/new)")]
    (hit,) = store.text_query(NS, "quokka", record(1, "").vector, 5)
    assert hit.score == pytest.approx(1.0, abs=1e-6) and hit.text_score and hit.text_score > 0  # cosine, sparse


def test_hybrid_ranking_fuses_the_dense_and_the_sparse_lists(standin: PineconeStandIn) -> None:
    store = PineconeStore(KEY, standin.host, sparse=True)
    store.upsert(NS, [record(i, f"word{i} common") for i in range(6)])
    top = ranked(store, NS, "word4", record(2, "").vector, 3)
    assert [f.hit.id for f in top][:2] == ["s2:0", "s4:0"] or [f.hit.id for f in top][:2] == ["s4:0", "s2:0"]
    by_id = {f.hit.id: f for f in top}
    assert by_id["s4:0"].text_rank == 1 and by_id["s2:0"].vector_rank == 1 and by_id["s2:0"].text_rank is None


def test_without_sparse_there_is_no_full_text_part_and_a_cosine_index_refuses_sparse_values() -> None:
    with PineconeStandIn(dimension=DIM, api_key=KEY) as cosine:
        store = PineconeStore(KEY, cosine.host)
        store.upsert(NS, [record(1, "zebrafish tuning")])
        assert store.text_query(NS, "zebrafish", record(1, "").vector, 5) == []
        assert [f.hit.id for f in ranked(store, NS, "zebrafish", record(1, "").vector, 5)] == ["s1:0"]
        with pytest.raises(Exception, match="dotproduct"):
            PineconeStore(KEY, cosine.host, sparse=True, max_attempts=1).upsert(NS, [record(2, "narwhal")])


def test_sparse_words_split_identifiers_and_drop_stop_words() -> None:
    assert sparse.words("The allow-unsafe-pr-checkout option, status_code 404!") == [
        "allow",
        "unsafe",
        "pr",
        "checkout",
        "option",
        "status",
        "code",
        "404",
    ]
    doc = sparse.document_vector("retry retry budget")
    q = sparse.query_vector("retry budget the")
    assert len(q["indices"]) == 2 and len(doc["indices"]) == 2
    weights = dict(zip(doc["indices"], doc["values"], strict=True))
    assert weights[sparse.query_vector("retry")["indices"][0]] > weights[sparse.query_vector("budget")["indices"][0]]
