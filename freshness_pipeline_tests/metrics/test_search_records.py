"""What a search records: weak matches only when there was a match to be weak, and an
unknown `--source` is the same configuration error as for every other command."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.cli import main
from freshness_pipeline.config import ConfigError, load_settings, state_url
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.search import search
from freshness_pipeline_tests.sitegen import generate


def weak_and_cited(sources: Path) -> tuple[list[str], list[str]]:
    store = StateStore(state_url(load_settings(sources)), read_only=True)
    try:
        metrics = store.metrics
        return [q["query"] for q in metrics.weak_queries()], metrics.cited_keys("docs")
    finally:
        store.close()


def test_weak_queries_need_an_index_to_be_weak_in(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with DocsSite() as site:
        sources = tmp_path / "sources.yaml"
        sources.write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": "docs", "sitemap": site.sitemap_url}],
                    "embedder": {"provider": "hashing"},
                    "weak_thresholds": {"hashing-v1-256": 1.01},  # every real match is weak
                }
            )
        )
        settings = load_settings(sources)
        # Nothing indexed yet: no results, and nothing recorded.
        assert search(settings, "how do I configure uploads?") == []
        assert weak_and_cited(sources) == ([], [])

        with pytest.raises(ConfigError, match="unknown source 'nope'; the sources file defines: docs"):
            search(settings, "anything", source="nope")
        assert main(["--sources", str(sources), "search", "anything", "--source", "nope"]) == 2
        assert "unknown source 'nope'" in capsys.readouterr().err

        site.publish(generate(2, sections_per_page=2, seed=5).markdown())
        assert main(["--sources", str(sources), "run"]) == 0
        hits = search(settings, "how do I configure uploads?", k=2)
        assert len(hits) == 2
        weak, cited = weak_and_cited(sources)
        assert weak == ["how do I configure uploads?"] and cited == sorted(h.key for h in hits)
