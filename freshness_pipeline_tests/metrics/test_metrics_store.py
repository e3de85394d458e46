"""The metrics tables on SQLite and Postgres (migration 0002), and `measure` on a
hand-built manifest whose ages and lags are worked out below."""

from __future__ import annotations

import time

import pytest

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.metrics_store import MetricsStore
from freshness_pipeline.adapters.state.store import PageRow, StateStore
from freshness_pipeline.config import Settings
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.metrics import measure

H = 3600.0


def test_counters_requests_and_retention(any_state_url: str) -> None:
    store = StateStore(any_state_url)
    m = MetricsStore(store)
    streaks = [
        m.count_misses("docs", "query", {"q": missed, "ok": False}) for missed in (True, True, False, True, True, True)
    ]
    assert [s["q"] for s in streaks] == [1, 2, 0, 1, 2, 3]
    assert m.chronic_misses("docs", 3) == [{"kind": "query", "subject": "q", "consecutive": 3, "total": 5, "runs": 6}]
    m.count_misses("docs", "query", {"ok": False})  # q left the golden set: it stops counting
    assert m.chronic_misses("docs", 1) == []

    m.request_reindex("docs", "first reason", from_version=1)
    m.request_reindex("docs", "second reason", from_version=1)
    assert m.pending_reindex("docs")["reason"] == "first reason"
    assert not m.settle_reindex("docs", active_version=1)  # no re-index landed yet
    assert m.settle_reindex("docs", active_version=2) and m.pending_reindex("docs") is None

    old = time.time() - 100 * 86_400
    m.record_search(
        weak={"query": "old", "model": "m", "best_score": 0.1, "best_url": None}, cited=[("docs", "k0")], now=old
    )
    m.record_search(
        weak={"query": "new", "model": "m", "best_score": 0.2, "best_url": "u"}, cited=[("docs", "k1"), ("docs", "k1")]
    )
    assert m.weak_queries()["query"].tolist() == ["new"]  # past 90 days: purged
    assert m.cited_keys("docs") == ["k1"]
    store.close()


def test_measure_on_a_hand_built_manifest(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    settings = Settings.model_validate(
        {"sources": [{"name": "docs", "sitemap": "http://x/sitemap.xml"}], "state_url": url}
    )
    store = StateStore(url)
    now = 100 * H
    # Page a changed at 50h; page b last changed at 10h and says it was updated on
    # 1970-01-01 (end of day: 24h, later than 10h, so it says nothing more).
    store.save_pages(
        [
            PageRow("docs", "http://x/a", "http://x/a", markdown="", first_seen=0.0, last_changed=50 * H),
            PageRow(
                "docs",
                "http://x/b",
                "http://x/b",
                markdown="",
                first_seen=0.0,
                last_changed=10 * H,
                page_date="1970-01-01",
            ),
        ]
    )
    base = {
        "source": "docs",
        "chunk_index": 0,
        "heading_path": [],
        "ordinal": 0,
        "text": "t",
        "embed_text": "t",
        "content_hash": "h",
        "tokens": 1,
    }
    sections = [  # (url, changed_at, indexed_at)
        ("http://x/a", 52 * H, 52 * H),  # landed in this run (started 51h): lag 2h, age 50h
        ("http://x/a", 55 * H, 55 * H),  # landed too: lag 5h, age 50h (the page changed at 50h)
        ("http://x/b", 12 * H, 12 * H),  # an old run: no lag here; age 90h
        ("http://x/b", 60 * H, 60 * H),  # landed at 60h... for a page unchanged since 10h
    ]
    with store.engine.begin() as conn:
        conn.execute(
            schema.sections.insert(),
            [
                {**base, "id": f"k{i}:0", "key": f"k{i}", "url": u, "changed_at": c, "indexed_at": t}
                for i, (u, c, t) in enumerate(sections)
            ],
        )
        conn.execute(
            schema.runs.insert(),
            [
                {"source": "docs", "started_at": 9 * H, "finished_at": 12 * H, "counts": {}},
                {"source": "docs", "started_at": 51 * H, "finished_at": 56 * H, "counts": {}},
            ],
        )
    ctx = SourceContext(settings, settings.source("docs"), store)
    r = measure(ctx, stale_share=0.1, now=now, run_id="r1")
    # Ages 50, 50, 90, 90 h: median 70h, p90 = 90h.
    assert (r.age_median_s, r.age_p90_s) == (70 * H, 90 * H)
    # Lags of sections that landed since the run started (51h) for changes seen since the
    # previous run started (9h): 2h, 5h and 50h (b, seen at 10h, landed at 60h).
    # Median 5h; p90 = 5 + 0.8 * 45 = 41h.
    assert (r.lag_median_s, r.lag_p90_s) == pytest.approx((5 * H, 41 * H))
    assert r.details["landed"] == 3
    # 0.9^0.35 * (24/41)^0.2 = 0.96380 * 0.89843 = 0.86590; no golden set, age within target.
    assert r.score == pytest.approx(0.86590, abs=1e-5) and r.alert
    assert MetricsStore(store).history("docs")[["run_id", "stale_share"]].values.tolist() == [["r1", 0.1]]
    store.close()
