"""A quiet redeploy costs nothing, on every shipped corpus: the newest revision served again
with new build noise (build stamps, a "Last updated" line in any of its forms, the tip of
the day, a "Related pages" aside drawn anew for every page) embeds, writes and deletes
nothing, and no per-request block ever becomes part of a section."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness

from .corpora import CORPORA, build_noise, first_seen, load_revisions, oracle

pytestmark = pytest.mark.corpus

QUIET_BUILDS = 3  # redeploys after the first index, each with other noise


@pytest.mark.timeout(1800)  # four runs; the first indexes the whole corpus (WebdriverIO: 800 s at load 16)
@pytest.mark.parametrize("name", CORPORA)
def test_a_quiet_redeploy_embeds_nothing(name: str, corpora: Path, dagster_home: Path) -> None:
    revisions = load_revisions(corpora / name)
    dates = first_seen(revisions)
    last = revisions[-1]
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url, name=name)
        site.publish(last.docs, noise=build_noise(1, dates))
        first = fr.run()
        assert first["embedded"] > 0 and first["errors"] == 0, first
        truth = oracle(site.base_url, last.docs, dates)
        for build in range(2, 2 + QUIET_BUILDS):
            site.publish(last.docs, noise=build_noise(build, dates))
            quiet = fr.run()
            assert (quiet["upserted"], quiet["deleted"], quiet["embedded"]) == (0, 0, 0), (
                f"{name} build {build}: {quiet}"
            )
        records = fr.dump()
        assert {r["content_hash"] for r in records} == {s.content_hash for s in truth.values()}
        assert not [r["url"] for r in records if "Related pages" in r["text"]]
