"""The instance settings: the shipped dagster.yaml and the one the CLI writes into a new
$DAGSTER_HOME are the same, load as a Dagster instance with the queue, the pool limit and run
monitoring, and a command in a fresh home prints no Dagster welcome."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import yaml

from freshness_pipeline.defs.instance import INSTANCE_CONFIG, write_instance_config

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_and_the_generated_config_are_equal(tmp_path: Path) -> None:
    shipped = yaml.safe_load((REPO / "dagster_home" / "dagster.yaml").read_text())
    assert shipped == INSTANCE_CONFIG
    postgres = yaml.safe_load((REPO / "dagster_home" / "dagster.postgres.yaml").read_text())
    assert {k: v for k, v in postgres.items() if k != "storage"} == INSTANCE_CONFIG
    assert write_instance_config(tmp_path / "home") and not write_instance_config(tmp_path / "home")
    assert yaml.safe_load((tmp_path / "home" / "dagster.yaml").read_text()) == INSTANCE_CONFIG


def test_the_config_loads_with_queue_pools_and_monitoring(tmp_path: Path, monkeypatch) -> None:
    write_instance_config(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
        queue = instance.get_concurrency_config().run_queue_config
        assert queue.max_concurrent_runs == 4 and queue.tag_concurrency_limits[0]["key"] == "dagster/partition"
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 10
        assert instance.run_monitoring_max_runtime_seconds == 3600
        assert instance.event_log_storage.get_concurrency_info("embeddings").limit == 1


def test_a_fresh_home_gets_the_config_and_no_welcome(tmp_path: Path) -> None:
    home = tmp_path / "new-home"
    sources = tmp_path / "sources.yaml"
    sources.write_text(yaml.safe_dump({"sources": [{"name": "docs", "sitemap": "http://127.0.0.1:9/sitemap.xml"}]}))
    # `run` makes a missing home (the reading commands refuse one); nothing listens, so it fails.
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "freshness_pipeline.cli", "--sources", str(sources), "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1 and "failure: fetched_pages: " in out.stdout, out.stdout + out.stderr
    assert yaml.safe_load((home / "dagster.yaml").read_text()) == INSTANCE_CONFIG
    assert "Telemetry" not in out.stdout + out.stderr and "welcome" not in (out.stdout + out.stderr).lower()


def test_a_refresh_stores_no_debug_lines(tmp_path: Path, monkeypatch) -> None:
    """Each stored event is a write to the event log: the IO manager's DEBUG lines are not kept."""
    from freshness_pipeline.demo.server import DocsSite
    from freshness_pipeline_tests.defs.harness import SOURCE, refresh, write_sources
    from freshness_pipeline_tests.sitegen import generate

    write_instance_config(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with DocsSite() as site, dg.DagsterInstance.get() as instance:
        site.publish(generate(2, sections_per_page=1, seed=5).markdown())
        monkeypatch.setenv("FRESHNESS_SOURCES", str(write_sources(tmp_path / "sources.yaml", site.sitemap_url)))
        instance.add_dynamic_partitions("sources", [SOURCE])
        result = refresh(instance)
        assert result.success
        entries = [r.event_log_entry for r in instance.get_records_for_run(result.run_id).records]
    assert [e.user_message for e in entries if e.dagster_event is None and e.level < logging.INFO] == []
    assert any(e.dagster_event is None and e.level == logging.INFO for e in entries)  # the stage lines stay
