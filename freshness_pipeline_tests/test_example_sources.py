"""`sources.example.yaml` is what the README tells operators to copy: it must load as is."""

from __future__ import annotations

from pathlib import Path

from freshness_pipeline.config import load_settings

EXAMPLE = Path(__file__).resolve().parent.parent / "sources.example.yaml"


def test_the_example_sources_file_loads() -> None:
    settings = load_settings(EXAMPLE)
    httpx = settings.source("httpx")
    assert httpx.checks.golden_min_hit5 == 0.8 and httpx.fetch.quarantine.gone.share == 0.2
    assert [s.name for s in settings.sources] == ["httpx", "help-center"]
