"""Embedded LanceDB vector store: one table per namespace, on local disk.

Each known metadata key is a column (so hashes and dumps never read vectors); any
other key goes into the `extra` JSON column and comes back merged into the dict. A
payload update rewrites columns of matched rows without the vector (a `merge_insert`
of a partial table), and a table made before a column existed gets it, empty, when a
writer opens it.

A namespace this store found empty takes its new ids as appends (`_Appending`) rather than
`merge_insert`s, which read the whole table on each call: a first run's 800,000 records
went from a growing join to plain writes.

Every write makes a new table version. `mark_committed` tags the current one
`committed`; readers (`committed=True`: search, dump) check that version out, so a search
during a run sees the index as the last commit left it, never half of a run's writes.
A table with a missing or unreadable file raises `DamagedState` naming it.

Full-text search: LanceDB's native full-text (BM25) index on `retrieval_text`, made with the
table. Lance keeps it in step by itself: a query also scans the rows written after the
index was built, and skips deleted rows and the old copies of rewritten ones (a changed
section, a payload update), so every table version answers with exactly its own rows. The
index is part of the table version, so `committed` readers see the one of the last commit.
But its BM25 statistics (document counts and lengths) still count the rows deleted or
rewritten since it was built, so scores drift from those of a fresh index of the same rows:
`mark_committed` rebuilds it whenever it does not cover exactly the table's rows, and an
index refreshed run by run ranks as a fresh full index does. It first fills
`retrieval_text` where a table made before the column lacks it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from freshness_pipeline.adapters.damage import REPAIR_INDEX, DamagedState
from freshness_pipeline.adapters.vectorstores.base import Hit, VectorRecord
from freshness_pipeline.adapters.vectorstores.lance_paths import table_folder, table_name

if TYPE_CHECKING:
    import pyarrow as pa
    from lancedb.db import LanceDBConnection
    from lancedb.index import IndexConfig
    from lancedb.table import LanceTable

# Metadata columns and their Arrow types, by name: pyarrow and numpy are imported where a
# table is written or searched (a `snapshot` of the namespace's files needs neither: a quiet
# run's checks read only that).
_COLUMNS: dict[str, str] = {
    "url": "string",
    "key": "string",
    "heading_path": "string",
    "content_hash": "string",
    "text": "string",
    "source": "string",
    "chunk_index": "int64",
    "fetched_at": "float64",
    "index_version": "int64",
    "as_of": "string",
    "title": "string",
    "retrieval_text": "string",
}
TEXT_COLUMN = "retrieval_text"
_SQL_TYPES = {"string": "STRING", "int64": "BIGINT", "float64": "DOUBLE"}
_META_COLUMNS = ["id", *_COLUMNS, "extra"]
_UPSERT_BATCH = 20_000
_DELETE_BATCH = 1_000
COMMITTED = "committed"  # the tag of the version readers see
_MISSING = re.compile(r"Not found: (?:Wrapped error: Not found: )?([^,\s]+)")


def heading_str(value: Any) -> str | None:
    """`heading_path` as stored: a sequence of headings is joined with " > "."""
    if value is None or isinstance(value, str):
        return value
    return " > ".join(map(str, value))


def _schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            *(pa.field(name, getattr(pa, type_)()) for name, type_ in _COLUMNS.items()),
            pa.field("extra", pa.string()),
        ]
    )


def _digest(record_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(record_id.encode(), digest_size=8).digest(), "little")


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class _Appending:
    """A namespace this store found empty, while it is the only writer: the table is at the
    version this store's last write made, so an id it has not written is not in the table
    and can be appended. Ids are kept as 8-byte digests (a collision only costs a merge)."""

    def __init__(self, version: int) -> None:
        import numpy as np

        self.version = version
        self.written = np.empty(0, dtype=np.uint64)

    def take(self, ids: Sequence[str]) -> bool:
        """Note the ids as written; whether none was written here before (nor is twice among them)."""
        import numpy as np

        digests = np.fromiter((_digest(i) for i in ids), dtype=np.uint64, count=len(ids))
        new = len(np.unique(digests)) == len(digests) and not np.isin(digests, self.written).any()
        self.written = np.concatenate([self.written, digests])
        return new


class LanceDBStore:
    """`VectorStore` on an embedded LanceDB database at `path`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._appending: dict[str, _Appending | None] = {}  # namespace -> its state, once looked at

    @cached_property
    def _db(self) -> LanceDBConnection:
        # Imported on first use: a quiet run whose reconcile finds the table as it was at its
        # last clean comparison (`snapshot`) never opens it.
        import lancedb

        return cast("LanceDBConnection", lancedb.connect(str(self.path)))

    def snapshot(self, namespace: str) -> str | None:
        """A digest of the table's files (names, sizes, modification times), read without
        Lance. Lance never rewrites a file in place, so any write changes it."""
        root = self.path / table_folder(namespace)
        digest = hashlib.blake2b(digest_size=16)
        for path in sorted(root.rglob("*")):
            if path.is_file():
                st = path.stat()
                digest.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()

    def _open(self, namespace: str, *, committed: bool = False) -> LanceTable | None:
        with self._damage(namespace):
            try:
                table = self._db.open_table(table_name(namespace))
            except ValueError:  # not found
                return None
            if committed and COMMITTED in table.tags.list():
                table.checkout(COMMITTED)
            elif not committed and (missing := [n for n in [*_COLUMNS, "extra"] if n not in table.schema.names]):
                # Written by an older version of this store: the new columns, empty.
                table.add_columns({n: f"CAST(NULL AS {_SQL_TYPES[_COLUMNS.get(n, 'string')]})" for n in missing})
            return table

    @contextmanager
    def _damage(self, namespace: str) -> Iterator[None]:
        """Lance's errors on a damaged table (a data file deleted, a manifest cut short) as
        one line naming the table and the way out."""
        try:
            yield
        except (RuntimeError, OSError) as exc:
            text = str(exc)
            if "lance error" not in text.lower() and "LanceError" not in text:
                raise
            missing = _MISSING.search(text)
            # Lance names files by object-store path: absolute, without its leading slash.
            what = f"a data file is missing: /{missing.group(1).lstrip('/')}" if missing else text.splitlines()[0][:300]
            where = self.path / table_folder(namespace)
            raise DamagedState(f"vector table {where} is damaged ({what}); {REPAIR_INDEX}") from None

    def mark_committed(self, namespace: str) -> None:
        """Tag the table's current version as the one readers see."""
        table = self._open(namespace)
        if table is None:
            return
        with self._damage(namespace):
            self._sync_text_index(table)
            tags = table.tags.list()
            if COMMITTED not in tags:
                table.tags.create(COMMITTED, table.version)
            elif tags[COMMITTED]["version"] != table.version:
                table.tags.update(COMMITTED, table.version)

    def committed_is_current(self, namespace: str) -> bool:
        table = self._open(namespace)
        if table is None:
            return True
        with self._damage(namespace):
            tags = table.tags.list()
        return COMMITTED in tags and tags[COMMITTED]["version"] == table.version

    def _sync_text_index(self, table: LanceTable) -> None:
        """Before a version is tagged: every row has its retrieval text, and the full-text
        index holds exactly the table's rows (a rebuild after any write since it was built)."""
        _fill_retrieval_text(table)
        index = _text_index(table)
        if index is not None:
            stats = table.index_stats(index.name)
            if stats is not None and stats.num_unindexed_rows == 0 and stats.num_indexed_rows == table.count_rows():
                return
        _build_text_index(table)

    def upsert(self, namespace: str, records: Sequence[VectorRecord]) -> None:
        if not records:
            return
        latest = list({r.id: r for r in records}.values())  # last write wins within a call
        dim = len(latest[0].vector)
        schema = _schema(dim)
        table = self._open(namespace)
        if table is None:
            table = self._db.create_table(table_name(namespace), schema=schema, exist_ok=True)
            if _text_index(table) is None:
                _build_text_index(table)  # from the start: a table is never without one
        have = table.schema.field("vector").type.list_size
        if have != dim:
            raise ValueError(f"namespace {namespace!r} holds {have}-d vectors, got {dim}-d")
        appending = self._appending_to(namespace, table)
        for start in range(0, len(latest), _UPSERT_BATCH):
            part = latest[start : start + _UPSERT_BATCH]
            batch = _to_arrow(part, schema, dim)
            if appending and appending.take([r.id for r in part]):
                table.add(batch)
            else:
                table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(batch)
            if appending:
                appending.version = table.version

    def _appending_to(self, namespace: str, table: LanceTable) -> _Appending | None:
        """The namespace's append state: begun when this store first finds it empty, ended
        for good once another writer moved the table past this store's last write."""
        if namespace not in self._appending:
            self._appending[namespace] = _Appending(table.version) if table.count_rows() == 0 else None
        appending = self._appending[namespace]
        if appending is not None and appending.version != table.version:
            appending = self._appending[namespace] = None
        return appending

    def update_metadata(self, namespace: str, updates: Mapping[str, dict[str, Any]]) -> None:
        table = self._open(namespace)
        if table is None or not updates:
            return
        self._appending[namespace] = None  # any other write ends the appends: merges from here on
        import pyarrow as pa

        ids = list(updates)
        for start in range(0, len(ids), _DELETE_BATCH):
            chunk = ids[start : start + _DELETE_BATCH]
            held = table.search().where(f"id IN ({', '.join(map(_quote, chunk))})").select(["id", "extra"])
            extras = {r["id"]: r["extra"] for r in held.limit(None).to_arrow().to_pylist()}
            rows = [{"id": i, **_columns(updates[i], extras[i])} for i in chunk if i in extras]
            if not rows:
                continue
            names = ["id", *sorted({k for r in rows for k in r} - {"id"})]
            schema = pa.schema([table.schema.field(n) for n in names])
            batch = pa.table({n: [r.get(n) for r in rows] for n in names}, schema=schema)
            table.merge_insert("id").when_matched_update_all().execute(batch)

    def delete(self, namespace: str, ids: Sequence[str]) -> None:
        table = self._open(namespace)
        if table is None or not ids:
            return
        self._appending[namespace] = None
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _DELETE_BATCH):
            chunk = unique[start : start + _DELETE_BATCH]
            table.delete(f"id IN ({', '.join(map(_quote, chunk))})")

    def list_hashes(self, namespace: str, *, committed: bool = False) -> dict[str, str]:
        table = self._open(namespace, committed=committed)
        if table is None:
            return {}
        with self._damage(namespace):
            data = table.search().select(["id", "content_hash"]).limit(None).to_arrow()
        return dict(zip(data["id"].to_pylist(), data["content_hash"].to_pylist(), strict=True))

    def records(self, namespace: str, *, committed: bool = False) -> Iterator[dict[str, Any]]:
        table = self._open(namespace, committed=committed)
        if table is None:
            return
        with self._damage(namespace):
            batches = list(table.search().select(_held(table)).limit(None).to_batches())
        for batch in batches:
            for row in batch.to_pylist():
                yield _from_row(row)

    def query(self, namespace: str, vector: Sequence[float], k: int, *, committed: bool = False) -> list[Hit]:
        table = self._open(namespace, committed=committed)
        if table is None:
            return []
        with self._damage(namespace):
            return _nearest(table, vector, k)

    def text_query(
        self, namespace: str, text: str, vector: Sequence[float], k: int, *, committed: bool = False
    ) -> list[Hit]:
        table = self._open(namespace, committed=committed)
        if table is None:
            return []
        with self._damage(namespace):
            return _matching(table, text, vector, k)

    def hybrid_query(
        self, namespace: str, vector: Sequence[float], text: str, k: int, *, committed: bool = False
    ) -> tuple[list[Hit], list[Hit]]:
        table = self._open(namespace, committed=committed)  # one version for both parts
        if table is None:
            return [], []
        with self._damage(namespace):
            return _nearest(table, vector, k), _matching(table, text, vector, k)

    def drop_namespace(self, namespace: str) -> None:
        """Idempotent, and works on a damaged table too (what Lance cannot remove is deleted)."""
        self._appending.pop(namespace, None)
        with self._damage(namespace):
            self._db.drop_table(table_name(namespace), ignore_missing=True)
        shutil.rmtree(self.path / table_folder(namespace), ignore_errors=True)


def _held(table: LanceTable) -> list[str]:
    """The metadata columns a table has: one read at an older committed version may lack new ones."""
    names = set(table.schema.names)
    return [c for c in _META_COLUMNS if c in names]


def _nearest(table: LanceTable, vector: Sequence[float], k: int) -> list[Hit]:
    import numpy as np

    rows = (
        table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
        .distance_type("cosine")
        .select([*_held(table), "_distance"])
        .limit(k)
        .to_arrow()
        .to_pylist()
    )
    return [Hit(id=row["id"], score=1.0 - row.pop("_distance"), metadata=_from_row(row)) for row in rows]


def _matching(table: LanceTable, text: str, vector: Sequence[float], k: int) -> list[Hit]:
    """BM25 over `retrieval_text` (stemmed, stop words dropped; the words are matched as
    given, never parsed as a query language), each hit with its cosine similarity to
    `vector`. A table version without the index (made before it existed and never committed
    since) has no full-text part: []."""
    import numpy as np
    from lancedb.query import MatchQuery

    if _text_index(table) is None:
        return []
    words: Any = MatchQuery(text, TEXT_COLUMN)  # type: ignore[call-arg]  # the stub omits its defaults
    rows = (
        table.search(words, query_type="fts")
        .select([*_held(table), "vector", "_score"])
        .limit(k)
        .to_arrow()
        .to_pylist()
    )
    query = np.asarray(vector, dtype=np.float32)
    out = []
    for row in rows:
        stored = np.asarray(row.pop("vector"), dtype=np.float32)
        cosine = float(stored @ query / ((np.linalg.norm(stored) * np.linalg.norm(query)) or 1.0))
        out.append(Hit(id=row["id"], score=cosine, metadata=_from_row(row), text_score=float(row.pop("_score"))))
    return out


def _text_index(table: LanceTable) -> IndexConfig | None:
    return next((i for i in table.list_indices() if i.index_type == "FTS" and i.columns == [TEXT_COLUMN]), None)


def _build_text_index(table: LanceTable) -> None:
    from lancedb.index import FTS

    table.create_index(TEXT_COLUMN, config=FTS(), replace=True)


def _fill_retrieval_text(table: LanceTable) -> None:
    """Rows written before the column existed get the retrieval text their heading path and
    markdown make (`core/retrieval.py`, the function that made what was embedded)."""
    from freshness_pipeline.core.retrieval import retrieval_text

    lacking = (
        table.search()
        .where(f"{TEXT_COLUMN} IS NULL")
        .select(["id", "heading_path", "text"])
        .limit(None)
        .to_arrow()
        .to_pylist()
    )
    if not lacking:
        return
    filled = [
        (r["id"], retrieval_text(tuple((r["heading_path"] or "").split(" > ")), r["text"] or "")) for r in lacking
    ]
    import pyarrow as pa

    for start in range(0, len(filled), _UPSERT_BATCH):
        part = filled[start : start + _UPSERT_BATCH]
        schema = pa.schema([table.schema.field("id"), table.schema.field(TEXT_COLUMN)])
        batch = pa.table({"id": [i for i, _ in part], TEXT_COLUMN: [t for _, t in part]}, schema=schema)
        table.merge_insert("id").when_matched_update_all().execute(batch)


def _to_arrow(records: Sequence[VectorRecord], schema: pa.Schema, dim: int) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    vectors = np.asarray([r.vector for r in records], dtype=np.float32)
    if vectors.shape != (len(records), dim):
        raise ValueError(f"every vector in one upsert must have {dim} dimensions")
    columns: dict[str, Any] = {
        "id": [r.id for r in records],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
    }
    for name in _COLUMNS:
        values = [r.metadata.get(name) for r in records]
        columns[name] = [heading_str(v) for v in values] if name == "heading_path" else values
    columns["extra"] = [
        json.dumps(extra, sort_keys=True, default=str) if extra else None
        for extra in ({k: v for k, v in r.metadata.items() if k not in _COLUMNS} for r in records)
    ]
    return pa.table(columns, schema=schema)


def _columns(metadata: dict[str, Any], extra_json: str | None) -> dict[str, Any]:
    """The columns a metadata update sets: known keys as given, the rest merged into `extra`."""
    out = {k: heading_str(v) if k == "heading_path" else v for k, v in metadata.items() if k in _COLUMNS}
    other = {k: v for k, v in metadata.items() if k not in _COLUMNS}
    if other:
        merged = {**(json.loads(extra_json) if extra_json else {}), **other}
        out["extra"] = json.dumps(merged, sort_keys=True, default=str)
    return out


def _from_row(row: dict[str, Any]) -> dict[str, Any]:
    extra = row.pop("extra", None)
    return {**row, **json.loads(extra)} if extra else row
