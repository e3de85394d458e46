"""`freshness status --json` is strict JSON: a metric missing from the latest measurement
(while an earlier one had it) is `null`, never `NaN`."""

from __future__ import annotations

import json
from pathlib import Path

from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate


def _strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise AssertionError(f"status --json printed {name}, which strict JSON parsers reject")

    return json.loads(text, parse_constant=refuse)


def test_status_json_prints_null_for_missing_metrics(dagster_home: Path) -> None:
    with DocsSite() as site:
        site.publish(generate(4, sections_per_page=2, seed=3).markdown())
        app = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        app.run()
    store = StateStore(f"sqlite:///{dagster_home / 'freshness.db'}")
    try:
        metrics = store.metrics
        (measured,) = metrics.history("docs")
        row = {k: v for k, v in measured.items() if k != "id"}
        metrics.add_metrics({**row, "hit_at_1": 0.5, "hit_at_5": 0.75, "mrr": 0.6})  # a golden set, then
        metrics.add_metrics({**row, "hit_at_1": None, "hit_at_5": None, "mrr": None})  # none
    finally:
        store.close()
    (status,) = _strict(app.cli("status", "--json"))
    assert status["freshness"]["hit_at_1"] is None and status["freshness"]["mrr"] is None
    assert [h["hit_at_5"] for h in status["freshness_history"]] == [None, 0.75, None]
    assert status["freshness"]["score"] == measured["score"]
