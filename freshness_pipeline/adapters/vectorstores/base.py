"""The vector store contract. LanceDB (embedded default) and Pinecone implement it.

Besides its vector, a record's metadata carries its `retrieval_text` (what was embedded):
`text_query` matches the query's words against it (LanceDB's full-text index, Pinecone's
sparse values), so the words of a search are found by the same record the vector is.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class VectorRecord:
    id: str
    vector: Sequence[float] | np.ndarray  # an embedder's float32 row is stored as it is
    metadata: dict[str, Any]  # at least: url, key, heading_path, content_hash, text, source,
    #                           chunk_index, fetched_at, index_version, as_of, title, retrieval_text


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    score: float  # cosine similarity, higher is closer
    metadata: dict[str, Any] = field(default_factory=dict)
    text_score: float | None = None  # the full-text (BM25 or sparse) score; `text_query` only


class VectorStore(Protocol):
    """One physical index; `namespace` separates sources and index versions."""

    def upsert(self, namespace: str, records: Sequence[VectorRecord]) -> None:
        """Insert or overwrite by id. Idempotent."""

    def update_metadata(self, namespace: str, updates: Mapping[str, dict[str, Any]]) -> None:
        """Set metadata keys of existing records (id -> keys), keeping their vectors: a
        payload-only change, no embedding. Unknown ids are ignored. Idempotent."""

    def delete(self, namespace: str, ids: Sequence[str]) -> None:
        """Delete by id. Ids that do not exist are ignored. Idempotent."""

    def list_hashes(self, namespace: str, *, committed: bool = False) -> dict[str, str]:
        """Every record id in the namespace mapped to its `content_hash` metadata;
        `committed` as for `records`."""

    def records(self, namespace: str, *, committed: bool = False) -> Iterator[dict[str, Any]]:
        """Every record's metadata plus its `id` (no vectors), for dumps. `committed`: as of
        the last `mark_committed` where the store keeps versions (readers during a run)."""

    def query(self, namespace: str, vector: Sequence[float], k: int, *, committed: bool = False) -> list[Hit]:
        """Top-k records by cosine similarity; `committed` as for `records`."""

    def text_query(
        self, namespace: str, text: str, vector: Sequence[float], k: int, *, committed: bool = False
    ) -> list[Hit]:
        """Top-k records by full-text score of `text` against their `retrieval_text`, each
        with its cosine similarity to `vector` as `score`; [] where the store has no full-text
        part for the namespace. `committed` as for `records`."""

    def hybrid_query(
        self, namespace: str, vector: Sequence[float], text: str, k: int, *, committed: bool = False
    ) -> tuple[list[Hit], list[Hit]]:
        """`query` and `text_query` at once, both read from one version of the namespace (a
        commit between them would mix two indexes in one answer)."""

    def snapshot(self, namespace: str) -> str | None:
        """A cheap fingerprint of what the namespace holds, equal only while nothing was
        written to it; None when the store cannot tell (a remote one)."""

    def mark_committed(self, namespace: str) -> None:
        """What the namespace holds now becomes what `committed` readers see, its full-text
        part included. Idempotent."""

    def committed_is_current(self, namespace: str) -> bool:
        """Whether `committed` readers see what the namespace holds now (nothing written
        since `mark_committed`); True where the store keeps no versions."""

    def drop_namespace(self, namespace: str) -> None:
        """Remove a namespace and all its records. Idempotent."""
