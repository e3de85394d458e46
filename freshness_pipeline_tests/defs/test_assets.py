"""The four assets through `dg.materialize`, and the definitions as Dagster loads them: the
numeric metadata the UI plots, tier counts, code versions, the checks in the job, the pool."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.core.noise import NORMALIZER_VERSION
from freshness_pipeline.defs.assets import (
    EMBEDDINGS_POOL,
    model_code_version,
    refresh_assets,
    settings_at_load,
    store_kinds,
)
from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.defs.resources import FreshnessResource
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import SOURCE
from freshness_pipeline_tests.sitegen import generate

COUNTS = (
    "crawled",
    "new",
    "changed",
    "unchanged",
    "gone",
    "errors",
    "embedded",
    "payload_updated",
    "deleted",
    "reused",
)


def test_materialize_records_what_the_ui_plots(sources: Path, site: DocsSite, instance: dg.DagsterInstance) -> None:
    site.publish(generate(5, sections_per_page=2, seed=4).markdown())
    result = dg.materialize(
        refresh_assets,
        partition_key=SOURCE,
        instance=instance,
        resources={"freshness": FreshnessResource()},
    )
    assert result.success
    meta = {e.asset_key.to_user_string(): e.materialization.metadata for e in result.get_asset_materialization_events()}
    assert set(meta) == {"fetched_pages", "section_manifest", "diff_plan", "vector_index"}
    fetched = meta["fetched_pages"]
    assert (fetched["crawled"].value, fetched["pages_warm"].value, fetched["pages_hot"].value) == (5, 5, 0)
    assert meta["section_manifest"]["sections"].value == 10
    assert (meta["diff_plan"]["sections_new"].value, meta["diff_plan"]["sections_payload_updated"].value) == (10, 0)
    index = meta["vector_index"]
    for key in (*COUNTS, "stale_share", "run_start_to_searchable_s", "seconds"):
        assert isinstance(index[key], (dg.IntMetadataValue, dg.FloatMetadataValue)), key
    assert (index["crawled"].value, index["new"].value, index["embedded"].value) == (5, 5, 10)
    assert index["run_start_to_searchable_s"].value > 0
    assert "reindex_reason" not in index and "reindex_reason" not in meta["section_manifest"]  # no empty keys
    pages = {r.data["url"]: r.data["sections written"] for r in index["top_changed_pages"].records}
    assert pages[f"{site.base_url}/guide/page0"] == 2
    # Every check runs inside its asset's step: one step per asset.
    steps = {e.step_key for e in result.get_step_success_events()}
    assert steps == {"fetched_pages", "section_manifest", "diff_plan", "vector_index"}
    job_checks = defs.resolve_job_def("refresh").asset_layer.asset_graph.asset_check_keys
    of_these = {k.name for k in job_checks if k.asset_key.to_user_string() != "freshness_metrics"}
    assert {e.check_name for e in result.get_asset_check_evaluations()} == of_these


def test_every_asset_loads_what_it_depends_on_and_every_output_is_read() -> None:
    """The asset graph shows every input: each upstream is an input the asset loads (no bare
    `deps`), and every refresh asset's output is some asset's input."""
    graph = defs.resolve_job_def("refresh").asset_layer.asset_graph
    inputs: dict[str, set[str]] = {}
    for key in graph.get_all_asset_keys():
        node = defs.resolve_assets_def(key)
        loaded = {i.name for i in node.op.input_defs if not i.dagster_type.is_nothing}
        names = {n: k.to_user_string() for n, k in node.keys_by_input_name.items()}
        assert set(names) == loaded, f"{key.to_user_string()} depends on what it does not load"
        inputs[key.to_user_string()] = set(names.values())
    assert inputs == {
        "fetched_pages": set(),
        "section_manifest": {"fetched_pages"},
        "diff_plan": {"section_manifest"},
        "vector_index": {"diff_plan"},
        "freshness_metrics": {"diff_plan", "vector_index"},
    }


def test_definitions_load_with_checks_pool_and_versions() -> None:
    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("refresh")
    graph = job.asset_layer.asset_graph
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert checks >= {
        ("diff_plan", "stale_share"),
        ("diff_plan", "change_spike"),
        ("vector_index", "reconcile_clean"),
        ("fetched_pages", "flagged_pages"),
        ("fetched_pages", "pages_not_checked"),
        ("freshness_metrics", "freshness_alert"),
    }
    # source_fresh is judged between runs by its own job, never a step of a refresh
    assert ("vector_index", "source_fresh") not in checks
    assert dg.AssetCheckKey(dg.AssetKey("vector_index"), "source_fresh") in defs.resolve_asset_graph().asset_check_keys
    specs = [s for a in refresh_assets for s in a.check_specs]
    assert [s.name for s in specs if s.blocking] == ["change_spike"]
    assert defs.resolve_assets_def("vector_index").op.pool == EMBEDDINGS_POOL
    versions = {k.to_user_string(): v for a in refresh_assets for k, v in a.code_versions_by_key.items()}
    assert f"normalizer-{NORMALIZER_VERSION}" in versions["section_manifest"]
    assert versions["vector_index"].startswith("index-1+")
    assert {s.name for s in defs.sensors} >= {
        "sources_partitions_sensor",
        "tier_cadence_sensor",
        "version_bump_sensor",
        "source_freshness_sensor",
    }


def test_model_version_from_the_sources_file(
    sources: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert model_code_version(settings_at_load()) == "hashing-v1-256/256"
    monkeypatch.setenv("FRESHNESS_SOURCES", str(sources.parent / "missing.yaml"))
    with caplog.at_level(logging.WARNING):
        assert model_code_version(settings_at_load()) == "model-unknown"
    assert "sources file not found" in caplog.text


def test_the_job_and_the_sensors_are_described() -> None:
    assert "fetch, sections, plan, index" in (defs.resolve_job_def("refresh").description or "")
    for sensor in defs.sensors:
        assert len(sensor.description or "") > 60, sensor.name


def test_kinds_follow_the_sources_file(sources: Path, site: DocsSite) -> None:
    assert store_kinds(settings_at_load()) == {"lancedb"}
    data = yaml.safe_load(sources.read_text())
    data["vector_store"] = {"provider": "pinecone", "host": "http://127.0.0.1:9"}
    sources.write_text(yaml.safe_dump(data))
    assert store_kinds(settings_at_load()) == {"pinecone"}


def test_loading_the_code_location_reads_the_sources_file_once(sources: Path) -> None:
    """Every process that loads the location (code server, run worker, `freshness run`
    in-process) pays each read, and a read validates the whole file."""
    script = (
        "import freshness_pipeline.config as config\n"
        "reads = []\n"
        "load = config.load_settings\n"
        "config.load_settings = lambda *a, **k: reads.append(1) or load(*a, **k)\n"
        "import freshness_pipeline.defs.definitions\n"
        "print(len(reads))\n"
    )
    env = {**os.environ, "FRESHNESS_SOURCES": str(sources)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "1"
