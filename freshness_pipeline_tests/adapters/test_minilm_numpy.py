"""The numpy forward pass of all-MiniLM-L6-v2 (what `freshness search` embeds a query with)
gives sentence-transformers' vectors, and a cold `freshness search` imports neither torch
nor sentence-transformers yet finds what the full model finds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from freshness_pipeline.adapters.embedders.local import LocalEmbedder, model_path
from freshness_pipeline.adapters.embedders.minilm_numpy import MiniLMQuery
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.test_cli import cli

TEXTS = [
    "how many times is an upload retried after a network error?",
    "x",
    "Ünïcode café naïve — résumé, 東京, emoji 🙂",
    "```python\nclient = httpx.Client(timeout=5.0)\n```",
    "Set `timeout_seconds` to change how long one request waits. " * 40,  # past the 256 window
]


@pytest.mark.slow
def test_the_numpy_pass_equals_sentence_transformers() -> None:
    fast = MiniLMQuery(model_path("all-MiniLM-L6-v2"))
    full = LocalEmbedder().embed(TEXTS)
    for text, want in zip(TEXTS, full):
        got = fast.embed(text)
        assert got.shape == (384,) and got.dtype == np.float32
        assert float(np.abs(got - want).max()) < 1e-5, text[:40]


@pytest.mark.slow
def test_a_cold_search_loads_no_torch_and_finds_the_same(dagster_home: Path) -> None:
    with DocsSite() as site:
        sources = dagster_home / "sources.yaml"
        sources.write_text(f"sources: [{{name: docs, sitemap: '{site.sitemap_url}'}}]\nembedder: {{provider: local}}\n")
        site.publish(generate(4, sections_per_page=3, seed=9).markdown())
        cli("run", "--sources", str(sources))
    query = "proxy timeout retry"
    in_process = json.loads(cli("search", query, "--json", "--sources", str(sources))[0])  # the full model
    probe = (
        "import sys; from freshness_pipeline.cli import main; "
        f"code = main(['search', {query!r}, '--json', '--sources', {str(sources)!r}]); "
        "print('LOADED', sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules)); sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out, loaded = done.stdout.rsplit("LOADED", 1)
    assert loaded.strip() == "[]", loaded
    cold = json.loads(out)
    assert [h["id"] for h in cold] == [h["id"] for h in in_process]
    assert [round(h["score"], 5) for h in cold] == [round(h["score"], 5) for h in in_process]
