"""Flapping pages in `freshness status`: a page that re-embeds on most runs is listed (the
usual sign of a missed noise rule); a page whose only churn is noise the pipeline already
strips is not."""

from __future__ import annotations

import random
from pathlib import Path

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.corpus.corpora import TIPS
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate, paragraph


def test_a_page_that_changes_on_every_run_is_flapping(dagster_home: Path) -> None:
    site_v = generate(3, sections_per_page=2, seed=9)
    rng = random.Random(1)
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        for run in range(4):  # the first build, then three runs that each re-embed page0
            site_v.pages["guide/page0.md"][0] = ("Status", paragraph(rng))  # a real edit every run
            site.publish(site_v.markdown())
            assert fr.run()["embedded"] == (6 if run == 0 else 1)
            status = fr.status()
            if run < 3:
                assert status["flapping"] == [], f"flapping after {run} re-embeds"
        assert status["flapping"] == [[f"{site.base_url}/guide/page0", 3]]
        assert f"flapping: {site.base_url}/guide/page0" in fr.cli("status")


def test_noise_that_is_stripped_is_not_flapping(dagster_home: Path) -> None:
    docs = generate(5, sections_per_page=2, seed=10).markdown()  # 5 pages: enough to learn a template
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        for build in range(4):
            site.publish(docs, noise=lambda path, b=build: {"tip": TIPS[b], "updated": f"{b + 2} days ago"})
            assert fr.run()["embedded"] == (10 if build == 0 else 0)
        assert fr.status()["flapping"] == []
