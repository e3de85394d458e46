"""Pinecone vector store through the official SDK; namespaces are Pinecone namespaces.

Requests are kept within the data plane's limits: at most 1000 vectors and 2 MB per
upsert, 40 KB of metadata per vector (longer `text` is cut to fit and flagged with
`text_truncated: true`), 1000 ids per delete. The SDK already retries 429/5xx a few
times (honouring Retry-After); on top of that each request is retried with exponential
backoff, so a longer outage of a few seconds still converges. Upserts and deletes are
idempotent by id, so retrying a batch that partly applied is safe. A payload update is
one `update(id=..., set_metadata=...)` per record (the API patches one id at a time); as
`set_metadata` never clears a key, a missing value is written as "".

The full-text part of a hybrid search: with `sparse` (an index of the dotproduct metric,
`vector_store.sparse`), each record carries sparse values of its retrieval text
(`core/sparse.py`), written with its vector by the same upsert, so a rewrite or a delete
changes both at once and a payload update touches neither. `text_query` asks with the
sparse query alone (a zero dense vector: the dense part adds nothing) and keeps the matches
that share a word. Without `sparse` it finds nothing, and searches are vector only. The
retrieval text itself is not stored in the metadata (it would double its size).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from pinecone import Pinecone
from pinecone.errors.exceptions import (
    ApiError,
    NotFoundError,
    PineconeConnectionError,
    PineconeTimeoutError,
)
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from freshness_pipeline.adapters.vectorstores.base import Hit, VectorRecord
from freshness_pipeline.adapters.vectorstores.lancedb_store import heading_str
from freshness_pipeline.core import sparse as sparse_words

log = logging.getLogger(__name__)

MAX_UPSERT_VECTORS = 1000
MAX_REQUEST_BYTES = 2_000_000  # the service's cap is 2 MB; keep a margin for the envelope
MAX_METADATA_BYTES = 40_000  # the service's cap is 40 KB (40,960 bytes)
MAX_DELETE_IDS = 1000
FETCH_BATCH = 100  # ids per fetch: one list page, and a URL of reasonable length
_FLOAT_BYTES = 25  # upper bound of one float in JSON: "-1.2345678901234567e-100,"
_INT_FIELDS = ("chunk_index", "index_version")  # Pinecone returns every number as a float
_NOT_STORED = ("retrieval_text",)  # sent as sparse values, not metadata
_T = TypeVar("_T")


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (PineconeTimeoutError, PineconeConnectionError)):
        return True
    return isinstance(exc, ApiError) and (exc.status_code in (408, 429) or exc.status_code >= 500)


def _from_pinecone(metadata: dict[str, Any] | None) -> dict[str, Any]:
    meta = dict(metadata or {})
    for name in _INT_FIELDS:
        if isinstance(meta.get(name), float):
            meta[name] = int(meta[name])
    return meta


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def fit_metadata(metadata: dict[str, Any], limit: int = MAX_METADATA_BYTES) -> dict[str, Any]:
    """Pinecone-ready metadata: no nulls, heading_path a string, `text` cut to fit `limit`."""
    meta = {k: v for k, v in metadata.items() if v is not None}
    if "heading_path" in meta:
        meta["heading_path"] = heading_str(meta["heading_path"])
    size = _json_size(meta)
    if size <= limit:
        return meta
    text = meta.get("text")
    if not isinstance(text, str):
        raise ValueError(f"metadata is {size} bytes, over Pinecone's {limit}, and has no text")
    meta["text_truncated"] = True
    encoded = text.encode()
    while size > limit:
        # JSON escapes can make a byte cost more than one, so recheck after each cut.
        keep = max(0, len(encoded) - (size - limit) - 16)
        encoded = encoded[:keep]
        meta["text"] = encoded.decode(errors="ignore")
        size = _json_size(meta)
        if not encoded and size > limit:
            raise ValueError(f"metadata without its text is still over Pinecone's {limit} bytes")
    return meta


class PineconeStore:
    """`VectorStore` on one Pinecone index, addressed by its data-plane `host`."""

    def __init__(
        self,
        api_key: str,
        host: str,
        *,
        batch_size: int = 100,
        timeout: float = 30.0,
        max_attempts: int = 5,
        max_backoff: float = 30.0,
        sparse: bool = False,
    ) -> None:
        if not 1 <= batch_size <= MAX_UPSERT_VECTORS:
            raise ValueError(f"batch_size must be between 1 and {MAX_UPSERT_VECTORS}")
        self.batch_size = batch_size
        self.sparse = sparse
        self._index = Pinecone(api_key=api_key, timeout=timeout).Index(host=host)
        self._retrying = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(max_attempts),
            wait=wait_random_exponential(multiplier=0.5, max=max_backoff),
            before_sleep=before_sleep_log(log, logging.WARNING),
            reraise=True,
        )

    def _call(self, fn: Callable[..., _T], **kwargs: Any) -> _T:
        return self._retrying.copy()(fn, **kwargs)

    def upsert(self, namespace: str, records: Sequence[VectorRecord]) -> None:
        for batch in self._upsert_batches(records):
            self._call(self._index.upsert, vectors=batch, namespace=namespace)

    def _upsert_batches(self, records: Sequence[VectorRecord]) -> Iterator[list[dict[str, Any]]]:
        batch: list[dict[str, Any]] = []
        size = 0
        for record in records:
            values = np.asarray(record.vector, dtype=np.float64).tolist()
            metadata = fit_metadata({k: v for k, v in record.metadata.items() if k not in _NOT_STORED})
            item = _json_size(record.id) + _FLOAT_BYTES * len(values) + _json_size(metadata) + 64
            vector: dict[str, Any] = {"id": record.id, "values": values, "metadata": metadata}
            words = sparse_words.document_vector(str(record.metadata.get("retrieval_text") or ""))
            if self.sparse and words["indices"]:
                vector["sparse_values"] = words
                item += _FLOAT_BYTES * 2 * len(words["indices"])
            if batch and (len(batch) >= self.batch_size or size + item > MAX_REQUEST_BYTES):
                yield batch
                batch, size = [], 0
            batch.append(vector)
            size += item
        if batch:
            yield batch

    def update_metadata(self, namespace: str, updates: Mapping[str, dict[str, Any]]) -> None:
        for vid, metadata in updates.items():
            meta = fit_metadata({k: "" if v is None else v for k, v in metadata.items() if k not in _NOT_STORED})
            self._call(self._index.update, id=vid, set_metadata=meta, namespace=namespace)

    def delete(self, namespace: str, ids: Sequence[str]) -> None:
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), MAX_DELETE_IDS):
            try:
                self._call(
                    self._index.delete,
                    ids=unique[start : start + MAX_DELETE_IDS],
                    namespace=namespace,
                )
            except NotFoundError:  # the namespace does not exist: nothing to delete
                return

    def _ids(self, namespace: str) -> Iterator[list[str]]:
        token: str | None = None
        while True:
            page = self._call(self._index.list_paginated, namespace=namespace, pagination_token=token)
            ids = [item.id for item in page.vectors if item.id]
            if ids:
                yield ids
            token = page.pagination.next if page.pagination else None
            if not token:
                return

    def _metadata(self, namespace: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for page in self._ids(namespace):
            for start in range(0, len(page), FETCH_BATCH):
                fetched = self._call(self._index.fetch, ids=page[start : start + FETCH_BATCH], namespace=namespace)
                for vid, vector in fetched.vectors.items():
                    yield vid, _from_pinecone(vector.metadata)

    def list_hashes(self, namespace: str, *, committed: bool = False) -> dict[str, str]:
        return {vid: meta.get("content_hash", "") for vid, meta in self._metadata(namespace)}

    def snapshot(self, namespace: str) -> str | None:
        return None  # a remote index has no cheap fingerprint: reconcile always compares

    # Pinecone has no versions to read: `committed` is accepted and reads the live
    # namespace (a re-index is still switched whole, by the active-namespace pointer).
    def mark_committed(self, namespace: str) -> None:
        return None

    def committed_is_current(self, namespace: str) -> bool:
        return True

    def records(self, namespace: str, *, committed: bool = False) -> Iterator[dict[str, Any]]:
        for vid, meta in self._metadata(namespace):
            yield {"id": vid, **meta}

    def text_query(
        self, namespace: str, text: str, vector: Sequence[float], k: int, *, committed: bool = False
    ) -> list[Hit]:
        words = sparse_words.query_vector(text)
        if not self.sparse or not words["indices"]:
            return []
        query = np.asarray(vector, dtype=np.float64)
        result = self._call(
            self._index.query,
            vector=[0.0] * len(query),
            sparse_vector=words,
            top_k=k,
            namespace=namespace,
            include_metadata=True,
            include_values=True,
        )
        hits = []
        for m in result.matches:
            if float(m.score) <= 0.0:  # no word in common: ranked by the zero dense part alone
                continue
            stored = np.asarray(m.values, dtype=np.float64)
            cosine = float(stored @ query / ((np.linalg.norm(stored) * np.linalg.norm(query)) or 1.0))
            hits.append(Hit(id=m.id, score=cosine, metadata=_from_pinecone(m.metadata), text_score=float(m.score)))
        return hits

    def hybrid_query(
        self, namespace: str, vector: Sequence[float], text: str, k: int, *, committed: bool = False
    ) -> tuple[list[Hit], list[Hit]]:
        # Two requests: Pinecone keeps no versions, both read the live namespace.
        return self.query(namespace, vector, k), self.text_query(namespace, text, vector, k)

    def query(self, namespace: str, vector: Sequence[float], k: int, *, committed: bool = False) -> list[Hit]:
        result = self._call(
            self._index.query,
            vector=np.asarray(vector, dtype=np.float64).tolist(),
            top_k=k,
            namespace=namespace,
            include_metadata=True,
        )
        return [Hit(id=m.id, score=float(m.score), metadata=_from_pinecone(m.metadata)) for m in result.matches]

    def drop_namespace(self, namespace: str) -> None:
        with contextlib.suppress(NotFoundError):  # never created, or already dropped
            self._call(self._index.delete, delete_all=True, namespace=namespace)

    def close(self) -> None:
        self._index.close()
