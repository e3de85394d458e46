"""A setting that changes nothing says so: `chunking.token_budget` set above the local model's
window (256 wordpieces) is capped, and the run's warnings (`freshness run`, the
section_manifest metadata and log) say it and what to set instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from freshness_pipeline.adapters.embedders.tokenizer import capped_budget
from freshness_pipeline.config import ChunkPolicy, EmbedderConfig
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.test_cli import cli

SAID = (
    "chunking.token_budget 300 is over the local embedder's window (256 all-MiniLM-L6-v2 tokens): "
    "sections are cut at 256, so set it to 256 or less"
)


def test_a_budget_over_the_window_is_said_only_when_set() -> None:
    local = EmbedderConfig(provider="local")
    assert capped_budget(local, ChunkPolicy.model_validate({"token_budget": 300})) == SAID
    assert capped_budget(local, ChunkPolicy()) is None  # the default (400) is not the user's choice
    assert capped_budget(local, ChunkPolicy.model_validate({"token_budget": 256})) is None
    openai = capped_budget(EmbedderConfig(provider="openai"), ChunkPolicy.model_validate({"token_budget": 2000}))
    assert openai is not None and "cut at 512" in openai


def test_the_run_says_the_budget_it_could_not_use(dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with DocsSite() as site:
        site.publish(generate(2, sections_per_page=2, seed=8).markdown())
        sources = dagster_home / "sources.yaml"
        body = {
            "sources": [{"name": "docs", "sitemap": site.sitemap_url, "chunking": {"token_budget": 300}}],
            "embedder": {"provider": "local"},
        }
        sources.write_text(yaml.safe_dump(body))
        monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
        out, _ = cli("run", "--sources", str(sources))
    assert f"  warning: {SAID}" in out.splitlines(), out
