"""Migration 0003 on a manifest written by 0002: the guessed page month goes, every row
gets `as_of` (the month it was first indexed) and a `title` column, on SQLite and Postgres."""

from __future__ import annotations

import calendar

from sqlalchemy import create_engine, inspect, text

from freshness_pipeline.adapters.state.migrate import upgrade
from freshness_pipeline.adapters.state.store import StateStore


def test_0003_dates_existing_rows_by_when_they_were_indexed(any_state_url: str) -> None:
    engine = create_engine(any_state_url)
    upgrade(engine, "0002")
    changed_at = float(calendar.timegm((2025, 7, 15, 12, 0, 0)))
    row = {
        "source": "docs",
        "id": "k:0",
        "key": "k",
        "chunk_index": 0,
        "url": "http://d.test/p",
        "heading_path": '["P"]',
        "ordinal": 0,
        "text": "body",
        "embed_text": "(as of Sep 2008)\n\nbody",
        "content_hash": "h",
        "tokens": 3,
        "page_date": "2008-09",  # guessed from an example value in the body
        "indexed_at": changed_at,
        "changed_at": changed_at,
    }
    with engine.begin() as conn:
        names = ", ".join(row)
        conn.execute(text(f"INSERT INTO sections ({names}) VALUES ({', '.join(':' + k for k in row)})"), row)
    upgrade(engine)
    columns = {c["name"] for c in inspect(engine).get_columns("sections")}
    assert {"as_of", "title"} <= columns and "page_date" not in columns
    engine.dispose()
    store = StateStore(any_state_url)
    (row,) = store.manifest.sections("docs")
    assert (row.as_of, row.title, row.text) == ("2025-07", None, "body")
    store.close()
