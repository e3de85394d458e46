"""The embedding cache stays bounded: after a run that replaced sections, `freshness
reconcile --fix` leaves no cache row that no committed section references, and `status`
reports the cache's size."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.cli import main
from freshness_pipeline.config import load_settings, state_url
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.source_status import source_status
from freshness_pipeline_tests.pipeline.test_end_to_end import run_json, write_sources
from freshness_pipeline_tests.sitegen import Site, generate, paragraph


def cache_and_manifest(store: StateStore) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(model, content hash) of every cache row, and of every committed section under its source's model."""
    c, s, src = schema.embedding_cache, schema.sections, schema.sources
    with store.engine.connect() as conn:
        cached = {(r.model, r.content_hash) for r in conn.execute(select(c.c.model, c.c.content_hash))}
        q = select(src.c.embed_model, s.c.content_hash).select_from(s.join(src, s.c.source == src.c.source))
        committed = {(r.embed_model, r.content_hash) for r in conn.execute(q)}
    return cached, committed


def test_a_run_that_replaced_sections_leaves_no_unreferenced_vectors(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = generate(5, sections_per_page=3, seed=3)
    v2 = Site(copy.deepcopy(v1.pages))
    rng = random.Random(11)
    page = v2.pages["guide/page0.md"]
    page[1] = (page[1][0], paragraph(rng))  # one section's text replaced
    del v2.pages["guide/page4.md"]  # a page gone: its three sections go

    with DocsSite() as site:
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        site.publish(v1.markdown())
        assert run_json(capsys, sources)["embedded"] == 15
        store = StateStore(state_url(load_settings(sources)))
        cached, committed = cache_and_manifest(store)
        assert cached == committed and len(cached) == 15
        # A vector of another model nothing uses (an earlier embedder's): it goes too.
        store.vector_cache.put("retired-model", 4, {"0" * 64: np.ones(4, dtype=np.float32)})

        site.publish(v2.markdown())
        second = run_json(capsys, sources)
        assert (second["changed"], second["gone"], second["embedded"]) == (1, 1, 1)
        cached, committed = cache_and_manifest(store)
        # Until pruned, the replaced texts stay (a revert would cost nothing) ...
        assert len(committed) == 15 - 3 and committed < cached and len(cached) == 15 + 1 + 1
        assert source_status(load_settings(sources), "docs")["embedding_cache_rows"] == 17

        assert main(["--sources", str(sources), "reconcile", "--fix", "--json"]) == 0
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cache_pruned"] == 5
        # ... and then only what the manifest references is left.
        cached, committed = cache_and_manifest(store)
        assert cached == committed and store.vector_cache.size() == 12

    status = source_status(load_settings(sources), "docs")
    assert status["embedding_cache_rows"] == 12 == status["sections_indexed"]
