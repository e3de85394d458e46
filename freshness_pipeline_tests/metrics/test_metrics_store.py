"""The metrics tables on SQLite and Postgres (migration 0002), and `measure` on a
hand-built manifest whose ages and lags are worked out below."""

from __future__ import annotations

import time

import pytest

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.config import Settings
from freshness_pipeline.core.state import PageRow
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.history import weak_searches
from freshness_pipeline.pipeline.metrics import measure
from freshness_pipeline.pipeline.source_status import freshness_status

H = 3600.0


def test_counters_requests_and_retention(any_state_url: str) -> None:
    migrate(any_state_url)
    store = StateStore(any_state_url)
    m = store.metrics
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
    assert [q["query"] for q in m.weak_queries()] == ["new"]  # past 90 days: purged
    assert m.cited_keys("docs") == ["k1"]
    m.record_search(weak={"query": "none", "model": "m", "best_score": None, "best_url": None}, cited=[])
    store.close()
    # As `freshness weak --json` prints them: missing values are null beside present ones, never NaN.
    settings = Settings(sources=[{"name": "docs", "sitemap": "http://x.test/sitemap.xml"}], state_url=any_state_url)
    (none, new) = weak_searches(settings, days=90)
    assert (none["query"], none["best_score"], none["best_url"]) == ("none", None, None)
    assert (new["query"], new["best_score"], new["best_url"]) == ("new", 0.2, "u")


SECTION = {
    "source": "docs",
    "chunk_index": 0,
    "heading_path": [],
    "ordinal": 0,
    "text": "t",
    "embed_text": "t",
    "content_hash": "h",
    "tokens": 1,
}


def hand_built(
    tmp_path, pages: list[PageRow], sections: list[tuple[str, float, float]], run_starts: list[float]
) -> tuple[StateStore, SourceContext]:
    """A source's state as written by committed runs: pages, sections (url, changed_at,
    indexed_at) and the start of each successful run, oldest first."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    settings = Settings.model_validate(
        {"sources": [{"name": "docs", "sitemap": "http://x/sitemap.xml"}], "state_url": url}
    )
    migrate(url)
    store = StateStore(url)
    store.pages.save(pages)
    with store.engine.begin() as conn:
        conn.execute(
            schema.sections.insert(),
            [
                {**SECTION, "id": f"k{i}:0", "key": f"k{i}", "url": u, "changed_at": c, "indexed_at": t}
                for i, (u, c, t) in enumerate(sections)
            ],
        )
        conn.execute(
            schema.runs.insert(),
            [{"source": "docs", "started_at": t, "finished_at": t + H, "counts": {}} for t in run_starts],
        )
    return store, SourceContext(settings, settings.source("docs"), store)


def page(url: str, **fields) -> PageRow:
    return PageRow("docs", f"http://x/{url}", f"http://x/{url}", markdown="", **fields)


def test_measure_on_a_hand_built_manifest(tmp_path) -> None:
    now = 100 * H
    pages = [
        page("a", first_seen=0.0, last_changed=50 * H),  # changed at 50h
        # Last changed at 10h; says it was updated on 1970-01-01 (end of day: 24h, later
        # than the sighting, so it says nothing more).
        page("b", first_seen=0.0, last_changed=10 * H, page_date="1970-01-01"),
        # New in this run (first fetched at 52h); says 1970-01-02 (48h, after the previous
        # run began), but the lag never starts before the first fetch.
        page("c", first_seen=52 * H, last_changed=52 * H, page_date="1970-01-02"),
        page("d", first_seen=0.0, outcome="error"),  # live, last fetch errored
        page("e", first_seen=0.0, outcome="flagged"),  # live, flagged as a soft 404
        page("f", first_seen=0.0, outcome="error", state="gone"),  # not live: not counted
    ]
    sections = [  # (url, changed_at, indexed_at)
        ("http://x/a", 52 * H, 52 * H),  # landed in this run (started 51h): lag 2h, age 50h
        ("http://x/a", 55 * H, 55 * H),  # landed too: lag 5h, age 50h (the page changed at 50h)
        ("http://x/b", 12 * H, 12 * H),  # an old run: no lag here; age 90h
        ("http://x/b", 60 * H, 60 * H),  # landed at 60h... for a page unchanged since 10h
        ("http://x/c", 53 * H, 53 * H),  # lag 1h (from 52h, not its date's 48h), age 48h
    ]
    store, ctx = hand_built(tmp_path, pages, sections, run_starts=[9 * H, 51 * H])
    r = measure(ctx, stale_share=0.1, now=now, run_id="r1")
    # Ages 50, 50, 90, 90, 48 h -> sorted 48, 50, 50, 90, 90: median 50h, p90 (rank 3.6) 90h.
    assert (r.age_median_s, r.age_p90_s) == (50 * H, 90 * H)
    # Lags of sections that landed since the run started (51h) for changes seen since the
    # previous run started (9h): 2h, 5h, 50h (b, seen at 10h, landed at 60h) and 1h.
    # Sorted 1, 2, 5, 50: median 3.5h; p90 (rank 2.7) = 5 + 0.7 * 45 = 36.5h.
    assert (r.lag_median_s, r.lag_p90_s) == pytest.approx((3.5 * H, 36.5 * H))
    assert r.details["landed"] == 4
    # Live pages a..e, d and e failing: 2 / 5.
    assert r.error_share == 0.4 and (r.details["live_pages"], r.details["failing_pages"]) == (5, 2)
    # (1 - 0.4)^0.15 * (24/36.5)^0.15 = 0.92624 * 0.93905 = 0.86978; no golden set, age
    # within target; the stale share (0.1, repaired by the commit) is not a factor.
    assert r.score == pytest.approx(0.86978, abs=1e-5) and r.alert
    assert "fetch errors: 40.0%" in r.line()
    assert [(h["run_id"], h["stale_share"]) for h in store.metrics.history("docs")] == [("r1", 0.1)]
    status = freshness_status(ctx)["freshness"]
    assert (status["score"], status["error_share"], status["alert"]) == (r.score, 0.4, True)
    store.close()


def test_a_first_run_lags_from_the_first_fetch_not_the_publication_date(tmp_path) -> None:
    # A source's first run (started at 100h) finds a page published on 1970-01-01 (its
    # date: 24h) and lands its section at 101h.
    pages = [page("a", first_seen=100.5 * H, last_changed=100.5 * H, page_date="1970-01-01", outcome="ok")]
    store, ctx = hand_built(tmp_path, pages, [("http://x/a", 101 * H, 101 * H)], run_starts=[100 * H])
    r = measure(ctx, stale_share=0.0, now=102 * H)
    # From the first fetch (100.5h), not the 77h since the page's date: 0.5h, no alert.
    assert (r.lag_median_s, r.lag_p90_s) == (0.5 * H, 0.5 * H)
    assert (r.error_share, r.score, r.alert) == (0.0, 1.0, False)
    store.close()
