"""Rows of a core/tables.py table as an Arrow table of its typed columns (timestamps in UTC
microseconds, dates as date32, every column nullable), and the files `freshness dump --format` writes."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from typing import IO, Any, Literal

import pyarrow as pa

from ..core.tables import Kind, Table

Format = Literal["jsonl", "parquet", "csv"]
_TYPES: dict[Kind, pa.DataType] = {
    "string": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
}


def schema(table: Table) -> pa.Schema:
    return pa.schema([pa.field(name, _TYPES[kind]) for name, kind in table.columns])


def arrow_table(rows: Iterable[Mapping[str, Any]], table: Table) -> pa.Table:
    """`rows` (dicts by column; timestamps in POSIX seconds) as an Arrow table of `table`."""
    rows = list(rows)
    columns = {name: [_value(r.get(name), kind) for r in rows] for name, kind in table.columns}
    return pa.Table.from_pydict(columns, schema=schema(table))


def _value(value: Any, kind: Kind) -> Any:
    if value is None or kind != "timestamp":
        return value
    return round(float(value) * 1_000_000)  # microseconds since the epoch, UTC


def write(data: pa.Table, out: IO[bytes], fmt: Format) -> None:
    """Parquet (its types kept), CSV (a header, then one line per row; timestamps ISO 8601)
    or JSON lines (one object per row; timestamps and dates ISO 8601)."""
    if fmt == "jsonl":
        for row in data.to_pylist():
            out.write((json.dumps({k: _iso(v) for k, v in row.items()}) + "\n").encode())
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(data, out)
    else:
        import pyarrow.csv as csv

        csv.write_csv(data, out)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime.date) else value  # datetimes too
