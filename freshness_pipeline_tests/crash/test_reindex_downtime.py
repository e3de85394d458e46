"""A full re-index without downtime, through `freshness run` (Dagster): a model change makes
the run write a new index version; SIGKILLed midway, searches keep being served from the
active version (with the model it was built with); once `dagster-daemon`'s run monitoring has
failed the killed run (docs/dagster.md, "Dead runs"), the next run completes the new version,
moves the pointer and drops the old one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import lancedb
import pytest
import yaml

from freshness_pipeline.cli import main
from freshness_pipeline.defs.instance import INSTANCE_CONFIG
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.indexing import CRASH_ENV
from freshness_pipeline_tests.dagster_services import daemon
from freshness_pipeline_tests.sitegen import generate

REPO = Path(__file__).resolve().parents[2]


def write_sources(path: Path, sitemap: str, dims: int) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "docs", "sitemap": sitemap}],
                "embedder": {"provider": "hashing", "dimensions": dims, "batch_size": 4},
                "vector_store": {"provider": "lancedb", "upsert_batch": 5},
            }
        )
    )
    return path


def cli_json(capsys: pytest.CaptureFixture[str], sources: Path, *args: str) -> list:
    assert main(["--sources", str(sources), *args]) == 0
    out = capsys.readouterr().out
    return (
        json.loads(out)
        if out.lstrip().startswith("[")
        else [json.loads(line) for line in out.splitlines() if line.strip()]
    )


def test_reindex_killed_midway_keeps_serving_the_old_version(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.loads(json.dumps(INSTANCE_CONFIG))  # the shipped dagster.yaml, timings shortened
    config["run_monitoring"] |= {"max_runtime_seconds": 20, "poll_interval_seconds": 2}
    config["run_monitoring"]["free_slots_after_run_end_seconds"] = 2
    (dagster_home / "dagster.yaml").write_text(yaml.safe_dump(config))
    v1 = generate(8, sections_per_page=3, seed=41)
    sections = len(v1.expected(""))
    with DocsSite() as site:
        site.publish(v1.markdown())
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url, dims=64)
        assert cli_json(capsys, sources, "run", "--json")[0]["status"] == "success"

        write_sources(sources, site.sitemap_url, dims=32)  # a new model: full re-index
        env = {**os.environ, CRASH_ENV: "upsert:2"}
        killed = subprocess.run(
            [sys.executable, "-m", "freshness_pipeline.cli", "--sources", str(sources), "run"],
            env=env,
            capture_output=True,
            timeout=180,
        )
        assert killed.returncode == -9, killed.stderr.decode()[-2000:]
        tables = lancedb.connect(str(dagster_home / "vectors")).list_tables().tables
        assert sorted(tables) == ["docs-v1", "docs-v2"]  # the new version, half written

        # Searches still read v1, embedding the query with v1's model.
        hits = cli_json(capsys, sources, "search", "cache retry timeout", "-k", "3", "--json")
        assert len(hits) == 3 and all(h["source"] == "docs" for h in hits)
        dumped = cli_json(capsys, sources, "dump")
        assert len(dumped) == sections and {r["index_version"] for r in dumped} == {1}

        env = {**os.environ, "PYTHONPATH": str(REPO), "FRESHNESS_SOURCES": str(sources)}
        with daemon(env, tmp_path / "daemon.log"):  # fails the killed run, frees its slot
            done = cli_json(capsys, sources, "run", "--json")[0]
        assert done["status"] == "success", done
        with dg.DagsterInstance.get() as instance:
            statuses = [r.dagster_run.status for r in instance.get_run_records()]
        assert sorted(s.value for s in statuses) == ["FAILURE", "SUCCESS", "SUCCESS"], statuses
        assert done["embedded"] == 0  # the killed run embedded (and cached) all before upserting
        dumped = cli_json(capsys, sources, "dump")
        got = {(r["url"], r["heading_path"], r["text"]) for r in dumped}
        assert got == v1.expected(site.base_url) and {r["index_version"] for r in dumped} == {2}
        assert lancedb.connect(str(dagster_home / "vectors")).list_tables().tables == ["docs-v2"]
        assert cli_json(capsys, sources, "reconcile", "--json")[0]["clean"]
        assert len(cli_json(capsys, sources, "search", "cache retry timeout", "-k", "3", "--json")) == 3
