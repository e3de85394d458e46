"""Helpers for the Dagster tests: a sources file for a loopback docs site (hashing embedder,
LanceDB and SQLite under the test's $DAGSTER_HOME) and the `refresh` job run against it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from freshness_pipeline.defs.definitions import defs

SOURCE = "docs"


def write_sources(path: Path, sitemap: str, embedder: str = "hashing", **source: Any) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": SOURCE, "sitemap": sitemap, **source}],
                "embedder": {"provider": embedder},
            }
        )
    )
    return path


def refresh(instance: dg.DagsterInstance, tags: dict[str, str] | None = None) -> dg.ExecuteInProcessResult:
    """One run of the `refresh` job (the four assets and their checks) for the source."""
    return defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=SOURCE, tags=tags or {}, raise_on_error=False
    )


def check_result(result: dg.ExecuteInProcessResult, name: str) -> dg.AssetCheckEvaluation:
    (found,) = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return found


def materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
