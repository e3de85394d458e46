"""Freshness is judged per source, against its own cadence: with one source unreachable past
its FAIL window and another just refreshed, the first reads ERROR and the second passes, as
the `source_fresh` check of each source's partition of `vector_index` (reported by each
refresh, and by `source_freshness_sensor` between runs)."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.defs.resources import FreshnessResource
from freshness_pipeline.defs.source_freshness import source_freshness_sensor
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.sitegen import generate

# "down" refreshes every 7.2 s / 9 s / 10.8 s (hot / warm / cold): past its FAIL window soon.
FAST = {"hot_every_h": 0.002, "warm_every_h": 0.0025, "cold_every_h": 0.003}


def _refresh(instance: dg.DagsterInstance, source: str) -> dg.ExecuteInProcessResult:
    return defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=source, raise_on_error=False
    )


def _fresh(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    (found,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "source_fresh"]
    return found


def _tick(instance: dg.DagsterInstance, cursor: str | None = None) -> tuple[list[dg.AssetCheckEvaluation], str | None]:
    """The check evaluations a tick reports, and its cursor."""
    with (
        dg.build_sensor_context(
            instance=instance, cursor=cursor, definitions=defs, resources={"freshness": FreshnessResource()}
        ) as ctx,
        dg.partition_loading_context(dynamic_partitions_store=instance),
    ):
        data = source_freshness_sensor.evaluate_tick(ctx)
    found = [e for e in data.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
    assert len(found) == len(data.asset_events)
    return found, data.cursor


def test_each_source_is_judged_against_its_own_cadence(dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with DocsSite() as up, DocsSite() as down, dg.DagsterInstance.get() as instance:
        up.publish(generate(2, sections_per_page=2, seed=5).markdown())
        down.publish(generate(2, sections_per_page=2, seed=6).markdown())
        path = dagster_home / "sources.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "sources": [
                        {"name": "up", "sitemap": up.sitemap_url},
                        {"name": "down", "sitemap": down.sitemap_url, "tiers": FAST},
                    ],
                    "embedder": {"provider": "hashing"},
                }
            )
        )
        monkeypatch.setenv("FRESHNESS_SOURCES", str(path))
        instance.add_dynamic_partitions("sources", ["up", "down"])
        for name in ("up", "down"):
            result = _refresh(instance, name)
            assert result.success and _fresh(result).passed, _fresh(result).description
            assert _fresh(result).partition == name

        first, cursor = _tick(instance)
        assert {e.partition: e.passed for e in first} == {"up": True, "down": True}
        # Nothing changed since: nothing reported again.
        assert _tick(instance, cursor)[0] == []

        down.__exit__(None, None, None)  # the site goes away; its runs fail, so nothing is committed
        time.sleep(11.0)  # past its slowest tier's interval (10.8 s)
        assert not _refresh(instance, "down").success
        assert _refresh(instance, "up").success

        later, _ = _tick(instance, cursor)
        by_source = {e.partition: e for e in later}
        assert set(by_source) == {"down"}, by_source  # "up" still passes: not reported again
        assert not by_source["down"].passed and by_source["down"].severity == dg.AssetCheckSeverity.ERROR
        assert "past its slowest tier's interval" in (by_source["down"].description or "")
        assert by_source["down"].asset_key == dg.AssetKey("vector_index")
        everyone = {e.partition: (e.passed, e.severity) for e in _tick(instance)[0]}
        assert everyone == {"up": (True, dg.AssetCheckSeverity.WARN), "down": (False, dg.AssetCheckSeverity.ERROR)}
