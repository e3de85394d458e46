"""Searches during a run see the index as the last commit left it, or as this run's commit
leaves it: never a half-applied run. A reader thread searches (k = every record) in a loop
while `freshness run` writes a large change in many small upsert batches (LanceDB makes a
table version per batch)."""

from __future__ import annotations

import copy
import random
import threading
from pathlib import Path

import yaml

from freshness_pipeline.cli import main
from freshness_pipeline.config import load_settings
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.search import search
from freshness_pipeline_tests.sitegen import Site, generate, paragraph

Seen = frozenset[tuple[str, str]]


def visible(sources: Path) -> Seen:
    hits = search(load_settings(sources), "cache retry upload", k=10_000, record=False)
    return frozenset((h.id, h.text) for h in hits)


def test_a_search_during_a_run_sees_the_old_or_the_new_index(dagster_home: Path) -> None:
    rng = random.Random(4)
    v1 = generate(20, sections_per_page=4, seed=12)  # 80 sections
    v2 = Site(copy.deepcopy(v1.pages))
    for rel in sorted(v2.pages)[:15]:  # 60 sections rewritten, one page gone, two added
        v2.pages[rel] = [(h, paragraph(rng)) for h, _ in v2.pages[rel]]
    del v2.pages["guide/page19.md"]
    v2.pages.update({f"new/page{i}.md": [(f"New {i}-{j}", paragraph(rng)) for j in range(4)] for i in range(2)})
    sources = dagster_home / "sources.yaml"
    with DocsSite() as site:
        sources.write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": "docs", "sitemap": site.sitemap_url, "checks": {"spike_min_share": 1.0}}],
                    "embedder": {"provider": "hashing", "batch_size": 4},
                    "vector_store": {"provider": "lancedb", "upsert_batch": 2},  # 34 table versions
                }
            )
        )
        site.publish(v1.markdown())
        assert main(["--sources", str(sources), "run"]) == 0
        old = visible(sources)
        assert len(old) == 80

        site.publish(v2.markdown())
        seen: list[Seen] = []
        done = threading.Event()

        def read() -> None:
            while not done.is_set():
                seen.append(visible(sources))

        reader = threading.Thread(target=read)
        reader.start()
        try:
            assert main(["--sources", str(sources), "run"]) == 0
        finally:
            done.set()
            reader.join()
        new = visible(sources)
    assert len(new) == 84 and new != old
    half_applied = [s for s in seen if s not in (old, new)]
    assert not half_applied, f"{len(half_applied)} of {len(seen)} searches saw a half-applied run"
    assert len(seen) >= 10 and old in seen  # the reader did search throughout the run
