"""Freshness per source over time, where the UI plots it: every `freshness_metrics`
materialization names the score, stale share, lag and error share of every source that has
been measured (`score/<source>` ...: its own run's figures, and each other source's latest),
so the asset's Plots ("Events") draw one unbroken line per source across runs, not isolated
points; the unnamed keys stay for the "Partitions" plots."""

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
        ordered = _oldest_first(instance)
        by_source: dict[str, list[dict[str, float]]] = {}
        for partition, values in ordered:
            by_source.setdefault(partition, []).append(values)
        assert sorted(by_source) == ["down", "up"] and all(len(runs) == 2 for runs in by_source.values())
        for source, runs in by_source.items():
            for values in runs:
                for key in PLOTTED:
                    assert values[f"{key}/{source}"] == values[key], (source, values)
        # Oldest first, the runs alternate up, down, up, down: from the second on, each also
        # carries the other source's latest figures, so every key has a value at every point.
        for (other, previous), (_, current) in zip(ordered, ordered[1:], strict=False):
            for key in PLOTTED:
                assert current[f"{key}/{other}"] == previous[f"{key}/{other}"], (key, other)
        assert all(f"{key}/{s}" in values for _, values in ordered[1:] for s in ("up", "down") for key in PLOTTED)


def _oldest_first(instance: dg.DagsterInstance) -> list[tuple[str, dict[str, float]]]:
    """The metrics' materializations, oldest first: (partition, float metadata)."""
    records = instance.fetch_materializations(dg.AssetKey("freshness_metrics"), limit=100).records
    out = []
    for record in reversed(records):
        m = record.asset_materialization
        assert m is not None and m.partition is not None
        out.append((m.partition, {k: v.value for k, v in m.metadata.items() if isinstance(v, dg.FloatMetadataValue)}))
    return out
