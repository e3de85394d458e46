"""Version-aware re-indexing through `freshness run`: a chunker or embedding-model change
re-indexes the whole source into a new namespace on its own, says why, writes every
section exactly once, drops the old namespace, and never mixes two models' vectors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import lancedb
import numpy as np
import pytest

from freshness_pipeline.adapters.embedders import make_embedder
from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.adapters.vectorstores.lancedb_store import table_name
from freshness_pipeline.config import EmbedderConfig
from freshness_pipeline.core.segment import CHUNKER_VERSION
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate


def tables(home: Path) -> dict[str, int]:
    """Every LanceDB table under $DAGSTER_HOME/vectors and the width of its vectors."""
    db = lancedb.connect(str(home / "vectors"))
    return {name: db.open_table(name).schema.field("vector").type.list_size for name in db.table_names()}


def assert_written_once(counts: dict, records: list[dict]) -> None:
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == counts["upserted"] == counts["sections_indexed"], counts
    assert counts["deleted"] == 0, "a re-index writes a new namespace; it deletes nothing in it"


def _built_with_an_older_chunker(home: Path) -> tuple[str, str]:
    """What an upgrade of the chunker looks like to a store: its index was built with an
    older chunker version than the code's (`core.segment.CHUNKER_VERSION`, no copy
    patched). Returns (stored version, current version)."""
    store = StateStore(f"sqlite:///{home / 'freshness.db'}")
    try:
        state = store.sources.get("docs")
        assert state is not None
        current = state.chunker_version
        assert current.startswith(f"{CHUNKER_VERSION}/"), current
        older = f"0-older{current.removeprefix(CHUNKER_VERSION)}"
        store.sources.save(replace(state, chunker_version=older))
    finally:
        store.close()
    return older, current


def test_a_chunker_change_reindexes_every_section_once(dagster_home: Path) -> None:
    site_v1 = generate(4, sections_per_page=3, seed=2)  # 40-word sections, ~60 tokens each
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(site_v1.markdown())
        first = fr.run()
        assert first["reindex_reason"] is None
        assert tables(dagster_home) == {table_name("docs-v1"): 256}
        texts = {r["id"]: r["content_hash"] for r in fr.dump()}

        # A new chunker version with the same chunks: every record written again into a new
        # namespace, each once; the vectors come from the cache (same model, same texts).
        older, current = _built_with_an_older_chunker(dagster_home)
        bumped = fr.run()
        assert f"chunker {older} -> {current}" in bumped["reindex_reason"], bumped
        assert bumped["embedded"] == 0 and bumped["reused"] == len(texts)
        records = fr.dump()
        assert_written_once(bumped, records)
        assert {r["id"]: r["content_hash"] for r in records} == texts
        assert {r["index_version"] for r in records} == {2}
        assert tables(dagster_home) == {table_name("docs-v2"): 256}, "the old namespace must be dropped"
        assert "chunker" in fr.status()["last_run"]["reason"]

        # A smaller token budget is a chunker change too, and it cuts the sections into chunks.
        fr.configure(chunking={"token_budget": 40})
        smaller = fr.run()
        assert "chunker" in smaller["reindex_reason"] and "/40" in smaller["reindex_reason"], smaller
        records = fr.dump()
        assert_written_once(smaller, records)
        assert len(records) > len(texts) and {0, 1} <= {r["chunk_index"] for r in records}
        assert smaller["embedded"] == len({r["content_hash"] for r in records})
        assert tables(dagster_home) == {table_name("docs-v3"): 256}

        # So is another chunk target: the sources file's setting reaches the chunker.
        fr.configure(chunking={"token_budget": 40, "target_share": 4})
        halves = fr.run()
        assert "/40 -> " in halves["reindex_reason"] and "/40/share-4" in halves["reindex_reason"], halves
        assert_written_once(halves, fr.dump())

        quiet = fr.run()  # the versions now match: an ordinary quiet run
        assert not quiet.get("reindex_reason") and (quiet["upserted"], quiet["embedded"]) == (0, 0), quiet


def test_a_model_change_reindexes_and_never_mixes_vectors(dagster_home: Path) -> None:
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(generate(3, sections_per_page=2, seed=4).markdown())
        fr.run()
        assert tables(dagster_home) == {table_name("docs-v1"): 256}

        fr.configure(embedder={"provider": "hashing", "dimensions": 128})
        changed = fr.run()
        reason = changed["reindex_reason"]
        assert "embedding model hashing-v1-256 -> hashing-v1-128" in reason and "dimensions 256 -> 128" in reason
        records = fr.dump()
        assert_written_once(changed, records)
        assert changed["embedded"] == len(records), "a new model may not reuse the old model's vectors"
        assert tables(dagster_home) == {table_name("docs-v2"): 128}

        # Every stored vector is the new model's vector of that record's retrieval text.
        db = lancedb.connect(str(dagster_home / "vectors"))
        rows = db.open_table(table_name("docs-v2")).to_arrow().select(["id", "vector"]).to_pylist()
        store = StateStore(f"sqlite:///{dagster_home / 'freshness.db'}")
        retrieval = {s.id: s.embed_text for s in store.manifest.sections("docs")}
        store.close()
        embedder = make_embedder(EmbedderConfig(provider="hashing", dimensions=128))
        want = embedder.embed([retrieval[r["id"]] for r in rows])
        assert np.allclose(np.asarray([r["vector"] for r in rows]), want, atol=1e-6)

        hits = fr.cli("search", records[0]["text"], "-k", "1", "--json")
        assert records[0]["id"] in hits


def test_turning_a_noise_rule_off_reindexes_every_page(dagster_home: Path) -> None:
    docs = generate(2, sections_per_page=1, seed=12).markdown()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs, noise=lambda path: {"updated": "June 3, 2026"})  # the same bytes on every run
        fr.run()
        assert not any("Last updated" in r["text"] for r in fr.dump())

        fr.configure(noise={"disabled_rules": ["last_updated"]})
        c = fr.run()
        assert "normalizer" in (c["reindex_reason"] or ""), c
        assert all(r["text"].endswith("Last updated: June 3, 2026") for r in fr.dump())


def test_a_page_that_fails_to_segment_keeps_its_sections_through_a_reindex(
    dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from freshness_pipeline.pipeline import workers

    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(generate(3, sections_per_page=2, seed=9).markdown())
        fr.run()
        records = fr.dump()
        before = {r["id"]: r["text"] for r in records}

        assert any(r["url"].endswith("/page1") for r in records)
        real, failed = workers.segment, []

        def broken_on_page1(url: str, *args: object, **kwargs: object) -> object:
            if url.endswith("/page1"):
                failed.append(url)
                raise RuntimeError("boom")
            return real(url, *args, **kwargs)

        # Patched in this process only: a site of `POOL_MIN_ITEMS` pages or more segments in
        # worker processes, where page1 would not fail (and the test would prove nothing).
        monkeypatch.setattr(workers, "segment", broken_on_page1)
        fr.configure(embedder={"provider": "hashing", "dimensions": 128})
        c = fr.run()
        assert "dimensions 256 -> 128" in c["reindex_reason"]
        assert len(failed) == 1, "page1's segmentation must have failed for this test to mean anything"
        after = fr.dump()
        assert {r["id"]: r["text"] for r in after} == before  # page1 kept, under the new model
        assert {r["index_version"] for r in after} == {2}
        assert c["embedded"] == len(before)
