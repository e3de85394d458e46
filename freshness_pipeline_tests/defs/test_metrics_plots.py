"""Freshness per source over time, where the UI plots it: every `freshness_metrics`
materialization names its score, stale share, lag and error share per source
(`score/<source>` ...), so the asset's Plots ("Events") draw one line per source across
runs, not the last run's values; the unnamed keys stay for the "Partitions" plots."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.test_source_freshness import _refresh, _sources

PLOTTED = ("score", "stale_share", "lag_p90_h", "error_share")


def test_each_run_plots_each_sources_figures_under_keys_that_name_it(
    dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DocsSite() as up, DocsSite() as down, dg.DagsterInstance.get() as instance:
        _sources(dagster_home, monkeypatch, up, down)
        instance.add_dynamic_partitions("sources", ["up", "down"])
        for _ in range(2):
            for name in ("up", "down"):
                assert _refresh(instance, name).success
        records = instance.fetch_materializations(dg.AssetKey("freshness_metrics"), limit=100).records
        by_source: dict[str, list[dict[str, float]]] = {}
        for record in reversed(records):  # oldest first
            m = record.asset_materialization
            assert m is not None and m.partition is not None
            by_source.setdefault(m.partition, []).append(
                {k: v.value for k, v in m.metadata.items() if isinstance(v, dg.FloatMetadataValue)}
            )
        assert sorted(by_source) == ["down", "up"] and all(len(runs) == 2 for runs in by_source.values())
        for source, runs in by_source.items():
            other = "up" if source == "down" else "down"
            for values in runs:
                for key in PLOTTED:
                    assert values[f"{key}/{source}"] == values[key], (source, values)
                    assert f"{key}/{other}" not in values  # a line per source, never mixed
