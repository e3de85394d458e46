"""Metadata values the assets and checks show in the UI, and the catalog's owners and tags."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from ..adapters.vectorstores.lance_paths import table_folder
from ..config import Settings
from ..core.tables import Kind, Table, utc_minute

ROW_COUNT = "dagster/row_count"
URI = "dagster/uri"
INDEX_EXTRAS = (
    "stale_share",
    "change_share",
    "run_start_to_searchable_s",
    "namespace",
    "reindex_reason",
    "top_changed_pages",
    ROW_COUNT,
    URI,
)
DEFAULT_OWNERS = ("team:freshness",)  # without `owners:` in the sources file


def table(rows: Iterable[Sequence[object] | Mapping[str, object]], schema: Table) -> dg.TableMetadataValue:
    """A typed table of `schema`'s columns (`core/tables.py`, shared with the frames), from
    rows as tuples in its order or as dicts by name; timestamps shown as UTC minutes."""
    records = []
    for row in rows:
        values = row if isinstance(row, Mapping) else dict(zip(schema.names, row, strict=True))
        records.append(dg.TableRecord({name: _cell(values[name], kind) for name, kind in schema.columns}))
    columns = [dg.TableColumn(name, kind) for name, kind in schema.columns]
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))


def _cell(value: Any, kind: Kind) -> str | int | float | bool | None:
    if value is None:
        return None
    if kind == "timestamp":  # POSIX seconds
        return utc_minute(float(value))
    if kind == "date":
        return str(value)  # YYYY-MM-DD
    return value if isinstance(value, str | int | float | bool) else str(value)


def index_uri(settings: Settings, namespace: str) -> str:
    """Where a source's records live: the LanceDB table's folder, or the Pinecone namespace."""
    store = settings.vector_store
    if store.provider == "pinecone":
        host = (store.host or store.index_name or "").removeprefix("https://").removeprefix("http://").rstrip("/")
        return f"pinecone://{host}/{namespace}"
    root = store.path or str(settings.home / "vectors")
    folder = table_folder(namespace)
    return f"{root.rstrip('/')}/{folder}" if "://" in root else (Path(root).resolve() / folder).as_uri()


def owners(settings: Settings | None) -> list[str]:
    return list(settings.owners) if settings is not None and settings.owners else list(DEFAULT_OWNERS)
