"""The process pool of extraction and segmentation: small batches stay in the calling
process, large ones go to spawned workers, and a refresh gives the same index either way."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline import workers
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate


def pid_of(item: int) -> tuple[int, int]:
    """Top level: a spawned worker imports it by name."""
    return item, os.getpid()


def test_a_few_hundred_pages_stay_in_this_process() -> None:
    # 300 pages extract faster than the pool starts (see workers.POOL_MIN_ITEMS).
    items = range(300)
    assert list(workers.parallel_map(pid_of, items)) == [(i, os.getpid()) for i in items]


def test_a_large_batch_goes_to_the_workers_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "POOL_MIN_ITEMS", 8)
    out = list(workers.parallel_map(pid_of, (i for i in range(100))))  # a generator, as the crawl's
    assert [i for i, _ in out] == list(range(100))
    assert os.getpid() not in {pid for _, pid in out}


def test_a_refresh_through_the_pool_builds_the_same_index(
    dagster_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools: list[int] = []

    class CountedPool(ProcessPoolExecutor):
        def __init__(self, *args: object, **kwargs: object) -> None:
            pools.append(1)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(workers, "ProcessPoolExecutor", CountedPool)
    site_pages = generate(12, sections_per_page=3, seed=5)
    indexes = []
    with DocsSite() as site:
        site.publish(site_pages.markdown())
        for threshold in (workers.POOL_MIN_ITEMS, 4):  # inline, then pooled
            monkeypatch.setattr(workers, "POOL_MIN_ITEMS", threshold)
            fr = Freshness(tmp_path / f"sources-{threshold}.yaml", site.sitemap_url, name=f"docs{threshold}")
            assert fr.run()["new"] == 12
            indexes.append({(r["url"], r["heading_path"], r["text"]) for r in fr.dump()})
    assert indexes[0] == indexes[1] == site_pages.expected(site.base_url)
    assert len(pools) == 2  # extraction and segmentation of the pooled run; none inline
