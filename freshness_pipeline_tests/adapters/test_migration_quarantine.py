"""Migration 0009 on pages written by 0008: each `pending` value becomes a typed quarantine
state (a mass 404 held as gone, a stub as near-empty with its key, another text as a
rewrite whose count starts again), on SQLite and Postgres."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect, text

from freshness_pipeline.adapters.state.migrate import upgrade
from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.core.quarantine import Kind, Quarantine


def test_0009_turns_each_pending_value_into_a_quarantine_state(any_state_url: str) -> None:
    engine = create_engine(any_state_url)
    upgrade(engine, "0008")
    held = {
        "http://d.test/a": ("gone", "held: 4 of 4 live pages would be gone"),
        "http://d.test/b": ("k" * 64, "turned near-empty (12 chars of text, had 900): held"),
        "http://d.test/c": ("h" * 64, "held: 6 of 20 pages fetched this run turned into text unlike their own"),
        "http://d.test/d": (None, None),
    }
    with engine.begin() as conn:
        for url, (pending, flag) in held.items():
            conn.execute(
                text(
                    "INSERT INTO pages (source, url, fetch_url, state, tier, flag, miss_count, error_count, "
                    "first_seen, last_fetched, change_times, pending) VALUES ('docs', :u, :u, 'live', 'warm', :f, "
                    "0, 0, 0, 50.0, '[]', :p)"
                ),
                {"u": url, "f": flag, "p": pending},
            )
    upgrade(engine)
    assert "pending" not in {c["name"] for c in inspect(engine).get_columns("pages")}
    engine.dispose()
    store = StateStore(any_state_url)
    rows = store.pages.load("docs")
    assert {u: r.quarantine for u, r in rows.items()} == {
        "http://d.test/a": Quarantine(Kind.GONE, "gone", 50.0),
        "http://d.test/b": Quarantine(Kind.NEAR_EMPTY, "k" * 64, 50.0),
        "http://d.test/c": Quarantine(Kind.REWRITTEN, "", 50.0),
        "http://d.test/d": None,
    }
    store.close()
