"""One table of model -> dimensions (`core/embedding_models.py`): the versions the manifest
and the cache keys record, the vector_index `code_version`, the embedder actually built and
search all agree, for every known model and the hashing default. The OpenAI models are also
run end to end (the real SDK against the stand-in) and searched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from freshness_pipeline.adapters.embedders import make_embedder
from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.cli import main
from freshness_pipeline.config import load_settings
from freshness_pipeline.core.embedding_models import DEFAULT_BACKEND, MODELS
from freshness_pipeline.defs.assets import model_code_version, settings_at_load
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import versions_for
from freshness_pipeline.pipeline.search import weak_threshold
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.standins.openai_standin import OpenAIStandIn

KEY = "sk-models-test"
KNOWN = [
    ("local", "all-MiniLM-L6-v2", 384),
    ("openai", "text-embedding-3-large", 3072),
    ("openai", "text-embedding-3-small", 1536),
    ("openai", "text-embedding-ada-002", 1536),
    ("hashing", None, 256),  # the hashing default: hashing-v1-256
]


def write(path: Path, embedder: dict[str, object], sitemap: str = "http://127.0.0.1:9/sitemap.xml") -> Path:
    path.write_text(yaml.safe_dump({"sources": [{"name": "docs", "sitemap": sitemap}], "embedder": embedder}))
    return path


def test_the_table_covers_every_known_model() -> None:
    assert {m for _, m, _ in KNOWN if m} == set(MODELS)


@pytest.mark.parametrize(("provider", "model", "dims"), KNOWN)
def test_versions_code_version_and_embedder_agree(
    provider: str, model: str | None, dims: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    embedder = {"provider": provider, **({"model": model} if model else {})}
    path = write(tmp_path / "sources.yaml", embedder)
    monkeypatch.setenv("FRESHNESS_SOURCES", str(path))
    settings = load_settings()
    v = versions_for(settings, settings.sources[0])
    # A local model's id carries its backend (the default, ONNX int8): a backend change re-indexes.
    name = f"{model}+{DEFAULT_BACKEND}" if provider == "local" else model or f"hashing-v1-{dims}"
    assert (v.model, v.dims) == (name, dims)
    assert model_code_version(settings_at_load()) == f"{name}/{dims}"
    built = make_embedder(settings.embedder)  # the local model is not loaded by this
    assert (built.model, built.dimensions) == (name, dims)
    assert weak_threshold(settings) == (0.25 if model == "all-MiniLM-L6-v2" else None)


@pytest.mark.parametrize("model", [m for p, m, _ in KNOWN if p == "openai"])
def test_openai_models_index_and_search_with_their_dimensions(
    model: str, dagster_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAIStandIn(api_key=KEY) as openai, DocsSite() as site:
        site.publish(generate(3, sections_per_page=2, seed=4).markdown())
        embedder = {"provider": "openai", "model": model, "base_url": openai.base_url}
        path = write(dagster_home / "sources.yaml", embedder, site.sitemap_url)
        assert main(["--sources", str(path), "run", "--json"]) == 0, capsys.readouterr()
        capsys.readouterr()
        assert main(["--sources", str(path), "status", "--json"]) == 0
        (status,) = json.loads(capsys.readouterr().out)
        assert status["sections_indexed"] == 6
        assert main(["--sources", str(path), "search", "cache retry", "--json"]) == 0
        hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 5 and -1.0 <= hits[0]["score"] <= 1.0
    store = StateStore(f"sqlite:///{dagster_home / 'freshness.db'}")
    try:
        state = store.sources.get("docs")
    finally:
        store.close()
    assert (state.embed_model, state.embed_dims) == (model, MODELS[model].dims)
