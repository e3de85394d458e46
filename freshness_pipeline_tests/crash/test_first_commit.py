"""A source whose first refresh died after its vector writes and before its commit has no
committed index: its readers see nothing of what that run wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_pipeline.config import load_settings
from freshness_pipeline.core.versions import namespace
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.search import dump, indexed_sources
from freshness_pipeline_tests.crash.child import refresh
from freshness_pipeline_tests.crash.test_crash_trials import KILLED, write_sources
from freshness_pipeline_tests.sitegen import generate


def test_a_first_run_killed_before_its_commit_leaves_nothing_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DocsSite() as site:
        site.publish(generate(4, sections_per_page=2, seed=5).markdown())
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        log = tmp_path / "embeds.log"
        assert refresh(sources, "docs", home, crash="verified", embed_log=log) == KILLED
        settings = load_settings(sources)
        ctx = SourceContext.open(settings, "docs", read_only=True)
        try:
            state = ctx.store.sources.get("docs")
            assert state is not None and state.generation == 0
            written = list(ctx.vectors.records(namespace("docs", state.active_version)))
        finally:
            ctx.close()
        assert written, "the killed run wrote its records (the test proves nothing otherwise)"
        assert list(dump(settings, "docs")) == []
        assert indexed_sources(settings, ["docs"]) == []
