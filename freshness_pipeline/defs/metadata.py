"""Metadata values the assets and checks show in the UI, and the catalog's owners and tags."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from ..adapters.vectorstores.lance_paths import table_folder
from ..config import Settings, dagster_home

# vector_index's metadata besides the run's counts (`run_summary.summarize` tells them apart)
INDEX_EXTRAS = (
    "stale_share",
    "change_share",
    "run_start_to_searchable_s",
    "namespace",
    "reindex_reason",
    "top_changed_pages",
    "dagster/row_count",
    "dagster/uri",
)
ROW_COUNT = "dagster/row_count"
URI = "dagster/uri"
DEFAULT_OWNERS = ("team:freshness",)  # without `owners:` in the sources file


def table(rows: Sequence[tuple[str, object]], headers: tuple[str, str]) -> dg.TableMetadataValue:
    """A two-column typed table (the second column an int when every value is one)."""
    numeric = all(isinstance(b, int) and not isinstance(b, bool) for _, b in rows)
    schema = dg.TableSchema(
        columns=[dg.TableColumn(headers[0], "string"), dg.TableColumn(headers[1], "int" if numeric else "string")]
    )
    records = [dg.TableRecord({headers[0]: str(a), headers[1]: _cell(b, numeric)}) for a, b in rows]
    return dg.MetadataValue.table(records, schema=schema)


def _cell(value: object, numeric: bool) -> int | str:
    return value if numeric and isinstance(value, int) else str(value)


def index_uri(settings: Settings, namespace: str) -> str:
    """Where a source's records live: the LanceDB table's folder, or the Pinecone namespace."""
    store = settings.vector_store
    if store.provider == "pinecone":
        host = (store.host or store.index_name or "").removeprefix("https://").removeprefix("http://").rstrip("/")
        return f"pinecone://{host}/{namespace}"
    root = store.path or str(Path(dagster_home()) / "vectors")
    folder = table_folder(namespace)
    return f"{root.rstrip('/')}/{folder}" if "://" in root else (Path(root).resolve() / folder).as_uri()


def owners(settings: Settings | None) -> list[str]:
    return list(settings.owners) if settings is not None and settings.owners else list(DEFAULT_OWNERS)
