"""What a Dagster engineer reads in the catalog: owners and tags on every asset, the number of
sections indexed and the vector store's address on vector_index, typed tables instead of
Markdown ones, no empty (null) metadata value, a description on every check result, sensor
descriptions without raw backticks, and freshness_metrics' alert as an asset check."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import SOURCE, refresh
from freshness_pipeline_tests.sitegen import generate

ASSETS = ("fetched_pages", "section_manifest", "diff_plan", "vector_index", "freshness_metrics")


def test_every_asset_has_owners_and_tags(sources: Path) -> None:
    data = yaml.safe_load(sources.read_text())
    graph = defs.resolve_asset_graph()
    for name in ASSETS:
        spec = graph.get(dg.AssetKey(name))
        assert spec.owners == ["team:freshness"], name  # no `owners:` in the sources file
        assert spec.tags.get("pipeline") == "freshness" and spec.tags.get("stage"), (name, spec.tags)
    assert "owners" not in data


def test_owners_come_from_the_sources_file(sources: Path) -> None:
    from freshness_pipeline.defs.assets import settings_at_load
    from freshness_pipeline.defs.metadata import owners

    data = yaml.safe_load(sources.read_text())
    data["owners"] = ["team:docs-search", "ana@example.com"]
    sources.write_text(yaml.safe_dump(data))
    assert owners(settings_at_load()) == ["team:docs-search", "ana@example.com"]


def test_sensor_descriptions_have_no_backticks() -> None:
    for sensor in defs.sensors or ():
        assert "`" not in (sensor.description or ""), sensor.name


def test_run_metadata_and_check_results(sources: Path, site: DocsSite, instance: dg.DagsterInstance) -> None:
    site.publish(generate(4, sections_per_page=3, seed=9).markdown())
    result = refresh(instance)
    assert result.success
    done = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    by_asset = {m.asset_key.to_user_string(): m.metadata for m in done}
    assert set(by_asset) == set(ASSETS)
    index = by_asset["vector_index"]
    assert index["dagster/row_count"] == dg.MetadataValue.int(12)
    uri = index["dagster/uri"].value
    vectors = Path(instance.root_directory) / "vectors" / f"{SOURCE}-v1.lance"
    assert uri == vectors.resolve().as_uri() and vectors.is_dir()
    assert isinstance(index["top_changed_pages"], dg.TableMetadataValue)
    assert isinstance(by_asset["fetched_pages"]["errors_by_page"], dg.TableMetadataValue)
    for asset, metadata in by_asset.items():
        for key, value in metadata.items():
            assert value.value is not None, (asset, key)
            assert not isinstance(value, dg.MarkdownMetadataValue) or "| --- |" not in value.value, (asset, key)

    checks = result.get_asset_check_evaluations()
    names = {c.check_name for c in checks}
    assert names >= {"stale_share", "change_spike", "flagged_pages", "pages_not_checked", "reconcile_clean"}
    assert "freshness_alert" in names and "source_fresh" not in names  # source_fresh: its own runs
    for c in checks:
        assert c.description, c.check_name
        assert all(v.value is not None for v in c.metadata.values()), c.check_name
    (alert,) = [c for c in checks if c.check_name == "freshness_alert"]
    assert alert.asset_key == dg.AssetKey("freshness_metrics") and alert.passed
    assert "alert" not in by_asset["freshness_metrics"]  # the check, not a boolean in metadata
