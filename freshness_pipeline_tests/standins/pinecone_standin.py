"""A stand-in for one Pinecone serverless index's data plane, for tests. Not Pinecone.

Mimics what the real `pinecone` SDK (10.x) sends and gets back over REST/JSON:
`POST /vectors/upsert`, `POST /query`, `GET /vectors/fetch?ids=..&namespace=..`,
`POST /vectors/delete` (ids or deleteAll), `GET /vectors/list` (paginated ids, sorted,
`pagination.next` token), `POST /vectors/update` (by id: `setMetadata` merged into the
stored metadata, `values` replaced; an unknown id is left alone; by-filter updates are
not modelled and answer 400) and `POST /describe_index_stats`. Like the service it checks the
`Api-Key` header (401), caps an upsert at 1000 vectors (400) and 2 MB (413), metadata at
40 KB per vector (400), a delete at 1000 ids (400), a list page at 100 ids, and requires
every vector to have the index's dimension and a non-zero value (400). Deleting from a
namespace that does not exist answers 404, as serverless does. Scores are cosine, or with
`metric="dotproduct"` the dot product of the dense values plus that of the sparse values
(`sparseValues` on upsert, `sparseVector` on query: a sparse-dense index, the only kind
that takes them; a cosine index answers 400). A query's dense vector may be all zeros (a
sparse-only ranking); a stored vector's may not.

Faults (see `_server`): besides statuses and "hang", ("vectors/upsert", "partial") applies
the first half of the next upsert and then answers 500, as a write that failed midway.
Metadata comes back as the service returns it: every number as a float (3 -> 3.0), and
null or nested values are refused (400).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from freshness_pipeline_tests.standins._server import (
    ApiFailure,
    LoopbackStandIn,
    Reply,
    Request,
)

MAX_UPSERT_VECTORS = 1000
MAX_REQUEST_BYTES = 2 * 1024 * 1024
MAX_METADATA_BYTES = 40 * 1024
MAX_DELETE_IDS = 1000
MAX_FETCH_IDS = 1000
MAX_LIST_LIMIT = 100
MAX_TOP_K = 10_000

Stored = tuple[np.ndarray, dict[str, Any] | None]


def _invalid(message: str, status: int = 400) -> ApiFailure:
    # The data plane answers errors as {"code": <gRPC code>, "message": ..., "details": []}.
    code = {400: 3, 401: 16, 404: 5, 413: 3}.get(status, 13)
    return ApiFailure(Reply(status, {"code": code, "message": message, "details": []}))


def _metadata_value(key: str, value: Any) -> Any:
    """As stored: numbers become floats (the service keeps every number as a double)."""
    if isinstance(value, bool | str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return value
    if isinstance(value, int | float):
        return float(value)
    raise _invalid(f"Metadata value for field {key!r} must be a string, number, boolean or list of strings")


class PineconeStandIn(LoopbackStandIn):
    """Stand-in Pinecone index; `namespaces` holds id -> (values, metadata) per namespace."""

    def __init__(
        self,
        *,
        dimension: int | None = None,
        api_key: str = "standin-key",
        hang_s: float = 5.0,
        metric: str = "cosine",
    ) -> None:
        super().__init__(hang_s=hang_s)
        self.dimension = dimension  # None: fixed by the first upsert
        self.metric = metric  # "cosine" or "dotproduct" (sparse-dense)
        self.sparse: dict[str, dict[str, dict[int, float]]] = {}  # namespace -> id -> index -> value
        self.api_key = api_key
        self.namespaces: dict[str, dict[str, Stored]] = {}
        self.updates = 0  # by-id updates applied
        self._routes: dict[tuple[str, str], Callable[[Request, str | None], Reply]] = {
            ("POST", "/vectors/upsert"): self._upsert,
            ("POST", "/query"): self._query,
            ("GET", "/vectors/fetch"): self._fetch,
            ("POST", "/vectors/delete"): self._delete,
            ("GET", "/vectors/list"): self._list,
            ("POST", "/vectors/update"): self._update,
            ("POST", "/describe_index_stats"): self._stats,
        }

    @property
    def host(self) -> str:
        return self.url

    def count(self, namespace: str) -> int:
        with self.lock:
            return len(self.namespaces.get(namespace, {}))

    def fault_reply(self, status: int) -> Reply:
        headers = {"Retry-After": "0"} if status == 429 else {}
        reply = _invalid(f"injected fault {status}", status).reply
        return Reply(status, reply.body, headers)

    def handle(self, request: Request, action: str | None) -> Reply:
        if request.headers.get("api-key") != self.api_key:
            raise _invalid("Invalid API Key", 401)
        route = self._routes.get((request.method, request.path))
        if route is None:
            raise _invalid(f"no route {request.method} {request.path}", 404)
        with self.lock:
            return route(request, action)

    def _upsert(self, request: Request, action: str | None) -> Reply:
        if len(request.raw) > MAX_REQUEST_BYTES:
            raise _invalid(
                f"Request size {len(request.raw)} bytes exceeds the maximum supported size "
                f"of {MAX_REQUEST_BYTES} bytes",
                413,
            )
        body = request.json()
        vectors = body.get("vectors") or []
        if len(vectors) > MAX_UPSERT_VECTORS:
            raise _invalid(f"Upsert request has {len(vectors)} vectors; the maximum is {MAX_UPSERT_VECTORS}")
        parsed = [(*self._check_vector(v), self._check_sparse(v.get("sparseValues"))) for v in vectors]
        name = body.get("namespace", "")
        target = self.namespaces.setdefault(name, {})
        words = self.sparse.setdefault(name, {})
        applied = parsed[: len(parsed) // 2] if action == "partial" else parsed
        for vid, stored, sparse in applied:
            target[vid] = stored
            words[vid] = sparse  # an upsert replaces both parts of a record
        if action == "partial":
            raise _invalid("internal error while writing; part of the batch may be applied", 500)
        return Reply(200, {"upsertedCount": len(parsed)})

    def _check_sparse(self, raw: Any) -> dict[int, float]:
        if raw is None:
            return {}
        if self.metric != "dotproduct":
            raise _invalid("Sparse vectors are only supported for indexes with the dotproduct metric")
        indices, values = raw.get("indices") or [], raw.get("values") or []
        if len(indices) != len(values) or len(set(indices)) != len(indices):
            raise _invalid("Sparse vector indices must be unique and as many as its values")
        return {int(i): float(v) for i, v in zip(indices, values, strict=True)}

    def _check_vector(self, vector: dict[str, Any]) -> tuple[str, Stored]:
        vid, values, metadata = vector.get("id"), vector.get("values"), vector.get("metadata")
        if not isinstance(vid, str) or not vid:
            raise _invalid("Vector ID must be a non-empty string")
        values = np.asarray(values or [], dtype=np.float32)
        if self.dimension is None:
            self.dimension = len(values)
        if len(values) != self.dimension:
            raise _invalid(f"Vector dimension {len(values)} does not match the dimension of the index {self.dimension}")
        if not values.any():
            raise _invalid("Dense vectors must contain at least one non-zero value")
        if metadata is not None:
            size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())
            if size > MAX_METADATA_BYTES:
                raise _invalid(
                    f"Metadata size is {size} bytes, which exceeds the limit of {MAX_METADATA_BYTES} bytes per vector"
                )
            metadata = {key: _metadata_value(key, value) for key, value in metadata.items()}
        return vid, (values, metadata)

    def _query(self, request: Request, action: str | None) -> Reply:
        body = request.json()
        top_k = body.get("topK", 0)
        if not 1 <= top_k <= MAX_TOP_K:
            raise _invalid(f"topK must be between 1 and {MAX_TOP_K}")
        namespace = body.get("namespace", "")
        stored = self.namespaces.get(namespace, {})
        query = np.asarray(body.get("vector") or [], dtype=np.float32)
        if stored and len(query) != self.dimension:
            raise _invalid(f"Vector dimension {len(query)} does not match the dimension of the index {self.dimension}")
        words = self._check_sparse(body.get("sparseVector"))
        matches = []
        if stored:
            ids = list(stored)
            matrix = np.stack([stored[i][0] for i in ids])
            if self.metric == "dotproduct":
                held = self.sparse.get(namespace, {})
                sparse = [sum(v * held.get(i, {}).get(at, 0.0) for at, v in words.items()) for i in ids]
                scores = matrix @ query + np.asarray(sparse, dtype=np.float32)
            else:
                scores = matrix @ query / (np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0))
            for at in np.argsort(-scores, kind="stable")[:top_k]:
                values, metadata = stored[ids[at]]
                match: dict[str, Any] = {"id": ids[at], "score": float(scores[at])}
                if body.get("includeValues"):
                    match["values"] = values.tolist()
                if body.get("includeMetadata") and metadata is not None:
                    match["metadata"] = metadata
                matches.append(match)
        return Reply(200, {"matches": matches, "namespace": namespace, "usage": {"readUnits": 5}})

    def _fetch(self, request: Request, action: str | None) -> Reply:
        ids = request.query.get("ids", [])
        if not ids or len(ids) > MAX_FETCH_IDS:
            raise _invalid(f"fetch takes 1 to {MAX_FETCH_IDS} ids, got {len(ids)}")
        namespace = request.query.get("namespace", [""])[0]
        stored = self.namespaces.get(namespace, {})
        vectors = {}
        for vid in ids:
            if vid in stored:
                values, metadata = stored[vid]
                vectors[vid] = {"id": vid, "values": values.tolist()}
                if metadata is not None:
                    vectors[vid]["metadata"] = metadata
        return Reply(200, {"vectors": vectors, "namespace": namespace, "usage": {"readUnits": 1}})

    def _delete(self, request: Request, action: str | None) -> Reply:
        body = request.json()
        namespace = body.get("namespace", "")
        if namespace not in self.namespaces:
            raise _invalid("Namespace not found", 404)
        if body.get("deleteAll"):
            del self.namespaces[namespace]
            self.sparse.pop(namespace, None)
            return Reply(200, {})
        ids = body.get("ids") or []
        if len(ids) > MAX_DELETE_IDS:
            raise _invalid(f"Delete request has {len(ids)} ids; the maximum is {MAX_DELETE_IDS}")
        stored = self.namespaces[namespace]
        for vid in ids:
            stored.pop(vid, None)
            self.sparse.get(namespace, {}).pop(vid, None)
        return Reply(200, {})

    def _update(self, request: Request, action: str | None) -> Reply:
        body = request.json()
        vid = body.get("id")
        if not isinstance(vid, str) or not vid or "filter" in body:
            raise _invalid("the stand-in models updates by id only")
        stored = self.namespaces.get(body.get("namespace", ""), {})
        if vid not in stored:
            return Reply(200, {})
        values, metadata = stored[vid]
        merged = {**(metadata or {}), **(body.get("setMetadata") or {})}
        new_values = body.get("values")
        _, stored[vid] = self._check_vector(
            {"id": vid, "values": values.tolist() if new_values is None else new_values, "metadata": merged}
        )
        self.updates += 1
        return Reply(200, {})

    def _list(self, request: Request, action: str | None) -> Reply:
        namespace = request.query.get("namespace", [""])[0]
        prefix = request.query.get("prefix", [""])[0]
        limit = int(request.query.get("limit", [MAX_LIST_LIMIT])[0])
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise _invalid(f"limit must be between 1 and {MAX_LIST_LIMIT}")
        token = request.query.get("paginationToken", [None])[0]
        after = base64.urlsafe_b64decode(token).decode() if token else None
        ids = sorted(
            vid
            for vid in self.namespaces.get(namespace, {})
            if vid.startswith(prefix) and (after is None or vid > after)
        )
        page = ids[:limit]
        body: dict[str, Any] = {
            "vectors": [{"id": vid} for vid in page],
            "namespace": namespace,
            "usage": {"readUnits": 1},
        }
        if len(ids) > limit:
            body["pagination"] = {"next": base64.urlsafe_b64encode(page[-1].encode()).decode()}
        return Reply(200, body)

    def _stats(self, request: Request, action: str | None) -> Reply:
        counts = {ns or "__default__": len(v) for ns, v in self.namespaces.items() if v}
        return Reply(
            200,
            {
                "namespaces": {ns: {"vectorCount": n} for ns, n in counts.items()},
                "dimension": self.dimension,
                "indexFullness": 0.0,
                "totalVectorCount": sum(counts.values()),
                "metric": self.metric,
                "vectorType": "dense",
            },
        )
