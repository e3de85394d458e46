"""Fixtures: a docs site on loopback, its sources file, and the test's Dagster instance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import SOURCE, write_sources


@pytest.fixture
def site() -> Iterator[DocsSite]:
    with DocsSite() as s:
        yield s


@pytest.fixture
def sources(dagster_home: Path, site: DocsSite, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = write_sources(dagster_home / "sources.yaml", site.sitemap_url)
    monkeypatch.setenv("FRESHNESS_SOURCES", str(path))
    return path


@pytest.fixture
def instance(dagster_home: Path) -> Iterator[dg.DagsterInstance]:
    """The persistent instance at the test's $DAGSTER_HOME, with the `sources` partition."""
    with dg.DagsterInstance.get() as inst:
        inst.add_dynamic_partitions("sources", [SOURCE])
        yield inst
