"""Freshness is judged per source, against its own cadence: with one source unreachable past
its FAIL window and another just refreshed, the first reads ERROR and the second passes, as
the `source_fresh` check of each source's partition of `vector_index`, which
`source_freshness_sensor` has run (a `source_freshness` run per source) whenever a source's
verdict changes. On a Postgres instance the sensor ticks again and again without failing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from sqlalchemy import create_engine, make_url, text

from freshness_pipeline.config import Settings
from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.defs.resources import FreshnessResource
from freshness_pipeline.defs.source_freshness import source_freshness_sensor
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.attempts import record_attempt
from freshness_pipeline.pipeline.source_status import source_status
from freshness_pipeline_tests.conftest import PG_ADMIN_URL
from freshness_pipeline_tests.sitegen import generate

# "down" refreshes every 7.2 s / 9 s / 10.8 s (hot / warm / cold): past its FAIL window soon.
# On a busy host the test stretches these by how long a refresh took there (`_stretch`).
FAST = {"hot_every_h": 0.002, "warm_every_h": 0.0025, "cold_every_h": 0.003}
CHECK = dg.AssetCheckKey(dg.AssetKey("vector_index"), "source_fresh")


def _refresh(instance: dg.DagsterInstance, source: str) -> dg.ExecuteInProcessResult:
    return defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=source, raise_on_error=False
    )


def _tick(instance: dg.DagsterInstance, cursor: str | None = None) -> tuple[list[dg.AssetCheckEvaluation], str | None]:
    """One tick as the daemon runs it: the tick, what it reports outside a run (stored with
    `report_runless_asset_event`, as the daemon does), and the runs it requests (executed
    here on the same instance). The check evaluations the tick led to, and its cursor."""
    with (
        dg.build_sensor_context(
            instance=instance, cursor=cursor, definitions=defs, resources={"freshness": FreshnessResource()}
        ) as ctx,
        dg.partition_loading_context(dynamic_partitions_store=instance),
    ):
        data = source_freshness_sensor.evaluate_tick(ctx)
    found = []
    for event in data.asset_events:
        instance.report_runless_asset_event(event)
        assert isinstance(event, dg.AssetCheckEvaluation)
        found.append(event)
    for request in data.run_requests or []:
        job = defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection=set(request.asset_selection or ()),
            asset_check_selection=set(request.asset_check_keys or ()),
        )
        result = job.execute_in_process(
            instance=instance,
            partition_key=request.partition_key,
            tags=request.tags,
            run_config=request.run_config,
            raise_on_error=False,
        )
        assert result.success, result.all_events
        (evaluation,) = result.get_asset_check_evaluations()
        found.append(evaluation)
    return found, data.cursor


def _stretch(refresh_s: float) -> float:
    """How much FAST is stretched so that a tick a few refreshes' time after "down"'s refresh
    still finds it within its fastest interval."""
    return max(1.0, 4 * refresh_s / (FAST["hot_every_h"] * 3600))


def source_status_rows(settings: Settings) -> list[dict[str, Any]]:
    return [source_status(settings, s.name) for s in settings.sources]


def _sources(home: Path, monkeypatch: pytest.MonkeyPatch, up: DocsSite, down: DocsSite, stretch: float = 1.0) -> None:
    up.publish(generate(2, sections_per_page=2, seed=5).markdown())
    down.publish(generate(2, sections_per_page=2, seed=6).markdown())
    path = home / "sources.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [
                    {"name": "up", "sitemap": up.sitemap_url},
                    {"name": "down", "sitemap": down.sitemap_url, "tiers": {k: v * stretch for k, v in FAST.items()}},
                ],
                "embedder": {"provider": "hashing"},
            }
        )
    )
    monkeypatch.setenv("FRESHNESS_SOURCES", str(path))


def test_each_source_is_judged_against_its_own_cadence(dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with DocsSite() as up, DocsSite() as down, dg.DagsterInstance.get() as instance:
        _sources(dagster_home, monkeypatch, up, down)
        instance.add_dynamic_partitions("sources", ["up", "down"])
        for name in ("up", "down"):
            began = time.monotonic()
            result = _refresh(instance, name)
            assert result.success
            assert not [e for e in result.get_asset_check_evaluations() if e.check_name == "source_fresh"]
        refreshed, stretch = time.monotonic(), _stretch(time.monotonic() - began)
        _sources(dagster_home, monkeypatch, up, down, stretch)  # the resource reads the file on each use

        first, cursor = _tick(instance)
        assert {e.partition: e.passed for e in first} == {"up": True, "down": True}
        # Nothing changed since: nothing reported again.
        assert _tick(instance, cursor)[0] == []

        down.__exit__(None, None, None)  # the site goes away; its runs fail, so nothing is committed
        slowest = FAST["cold_every_h"] * 3600 * stretch
        time.sleep(max(0.0, refreshed + slowest + 0.2 - time.monotonic()))  # past its slowest tier's interval
        failed = _refresh(instance, "down")
        assert not failed.success
        # a refresh does not plan source_fresh, so a failed one leaves no execution PLANNED
        history = instance.event_log_storage.get_asset_check_execution_history(CHECK, limit=50)
        assert history and not [r for r in history if r.run_id == failed.run_id], history
        assert _refresh(instance, "up").success

        later, _ = _tick(instance, cursor)
        by_source = {e.partition: e for e in later}
        assert set(by_source) == {"down"}, by_source  # "up" still passes: not reported again
        assert not by_source["down"].passed and by_source["down"].severity == dg.AssetCheckSeverity.ERROR
        assert "past its slowest tier's interval" in (by_source["down"].description or "")
        assert by_source["down"].asset_key == dg.AssetKey("vector_index")
        everyone = {e.partition: (e.passed, e.severity) for e in _tick(instance)[0]}
        assert everyone == {"up": (True, dg.AssetCheckSeverity.WARN), "down": (False, dg.AssetCheckSeverity.ERROR)}


def test_never_refreshed_then_blocked_says_so_as_status_does(
    dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the first tick, before any run, a source is "never refreshed" and passes (its first
    interval has not passed); after a blocked attempt the check turns WARN with what blocked
    it, as `freshness status` says, instead of staying green with an old description."""
    with DocsSite() as up, DocsSite() as down, dg.DagsterInstance.get() as instance:
        _sources(dagster_home, monkeypatch, up, down)
        instance.add_dynamic_partitions("sources", ["up", "down"])
        first, cursor = _tick(instance)
        assert {e.partition: (e.passed, e.severity) for e in first} == {
            "up": (True, dg.AssetCheckSeverity.WARN),
            "down": (True, dg.AssetCheckSeverity.WARN),
        }
        assert all("never refreshed" in (e.description or "") for e in first), first
        assert _refresh(instance, "up").success
        fresh, cursor = _tick(instance, cursor)  # "down" may be past its 7.2 s or 10.8 s by now
        (up_fresh,) = [e for e in fresh if e.partition == "up"]
        assert up_fresh.passed and " ago" not in (up_fresh.description or ""), up_fresh
        assert "last refreshed" in (up_fresh.description or "")

        settings = FreshnessResource().settings()
        record_attempt(settings, "up", {"run_id": "r1", "status": "blocked", "message": "change_spike: 62%"})
        blocked = [e for e in _tick(instance, cursor)[0] if e.partition == "up"]
        assert [(e.passed, e.severity) for e in blocked] == [(False, dg.AssetCheckSeverity.WARN)]
        assert "was blocked: change_spike: 62%" in (blocked[0].description or ""), blocked
        assert blocked[0].metadata["verdict"].value == "blocked"
        (row,) = [r for r in source_status_rows(settings) if r["source"] == "up"]
        assert row["verdict"]["state"] == "blocked" and row["freshness"]["alert"] is True


@pytest.fixture
def postgres_home(dagster_home: Path) -> Iterator[Path]:
    """The test's $DAGSTER_HOME with its instance on a new database of the local Postgres
    (dagster_home/dagster.postgres.yaml's storage, by URL)."""
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"freshness_dagster_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    config = yaml.safe_load((dagster_home / "dagster.yaml").read_text())
    config["storage"] = {"postgres": {"postgres_url": url}}
    (dagster_home / "dagster.yaml").write_text(yaml.safe_dump(config))
    yield dagster_home
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.mark.postgres
def test_the_sensor_reports_a_partitions_verdict_again_and_again_on_postgres(
    postgres_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition's check reported a second time, then a third: each tick's results land
    (a runless result was unique per partition, and the second failed every tick)."""
    with DocsSite() as up, DocsSite() as down, dg.DagsterInstance.get() as instance:
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        _sources(postgres_home, monkeypatch, up, down)
        instance.add_dynamic_partitions("sources", ["up", "down"])
        for name in ("up", "down"):
            assert _refresh(instance, name).success
        for _ in range(3):  # no cursor: every source's verdict is reported again
            found, _ = _tick(instance)
            assert sorted(e.partition or "" for e in found) == ["down", "up"]
        for name in ("up", "down"):
            history = instance.event_log_storage.get_asset_check_execution_history(
                CHECK, limit=10, partition_filter=None
            )
            mine = [r for r in history if r.partition == name]
            assert len(mine) == 3, mine
            # "up" passes; "down" (7.2 s cadence) may have turned WARN by now: a result either way
            assert {r.status.value for r in mine} <= ({"SUCCEEDED"} if name == "up" else {"SUCCEEDED", "FAILED"})
            # its plot is its own: the figures are named after the source
            for record in mine:
                evaluation = record.event.asset_check_evaluation  # type: ignore[union-attr]
                assert f"hours_since/{name}" in evaluation.metadata
                assert not [k for k in evaluation.metadata if k.startswith("hours_since") and not k.endswith(name)]
