"""A site that answers 404 for most of its pages at once is an outage, not a deletion:
the quarantine holds them (no error), the run says why in one line, and the operator's
release lets a real one through."""

from __future__ import annotations

from pathlib import Path

from freshness_pipeline.defs.runner import run_refresh
from freshness_pipeline.defs.tags import ALLOW_SPIKE_TAG, RELEASE_TAG
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate


def test_mass_404_is_held_until_a_release(dagster_home: Path) -> None:
    docs = generate(4, sections_per_page=2, seed=31).markdown()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs)
        fr.run()
        before = fr.dump()
        assert len(before) == 8

        site.publish({})  # every page 404s, the sitemap is empty: a broken deploy
        held = run_refresh("docs")
        assert held["status"] == "success", held
        assert (held["gone"], held["deleted"], held["errors"], held["flagged"]) == (0, 0, 0, 4), held
        assert all(why.startswith("held: gone") for why in held["flagged_pages"].values())
        (line,) = [w for w in held["warnings"] if w.startswith("quarantine gone: ")]
        assert line.startswith("quarantine gone: 4 held (") and "freshness release --kind gone" in line
        assert any(w.startswith("discovery found no pages") for w in held["warnings"])  # said, not silent
        assert fr.dump() == before

        site.publish(docs)  # the site is back: nothing to repair, nothing blocked
        back = fr.run()
        assert (back["embedded"], back["deleted"], back["upserted"]) == (0, 0, 0)

        site.publish({})  # ... and when the pages really are gone, the operator says so: the
        # release takes them, and the change spike their loss is must be let through too
        assert run_refresh("docs", tags={RELEASE_TAG: "gone"})["status"] == "blocked"
        assert fr.dump() == before
        allowed = run_refresh("docs", tags={RELEASE_TAG: "gone", ALLOW_SPIKE_TAG: "true"})
        assert allowed["status"] == "success", allowed
        assert (allowed["gone"], allowed["deleted"]) == (4, 8)
        assert [w for w in allowed["warnings"] if w.startswith("quarantine gone: 0 held, 0 taken, 4 released (")]
        assert fr.dump() == []


def test_losing_a_minority_of_pages_is_not_held(dagster_home: Path) -> None:
    site_docs = generate(4, sections_per_page=1, seed=32).markdown()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(site_docs)
        fr.run()
        del site_docs["guide/page3.md"]
        site.publish(site_docs)
        c = fr.run()
        assert (c["gone"], c["deleted"], c["errors"]) == (1, 1, 0)


def test_with_the_guard_off_a_mass_deletion_is_a_blocking_spike(dagster_home: Path) -> None:
    import copy
    import random

    from freshness_pipeline_tests.sitegen import Site, paragraph

    site_docs = generate(4, sections_per_page=2, seed=33)
    with DocsSite() as site:
        fr = Freshness(
            dagster_home / "sources.yaml",
            site.sitemap_url,
            source_settings={"fetch": {"quarantine": {"gone": {"confirm": 0}}}},
        )
        site.publish(site_docs.markdown())
        fr.run()
        edited = Site(copy.deepcopy(site_docs.pages))
        heading, _ = edited.pages["guide/page0.md"][0]
        edited.pages["guide/page0.md"][0] = (heading, paragraph(random.Random(1)))
        site.publish(edited.markdown())
        assert fr.run()["upserted"] == 1  # a normal week: 1 of 8 sections
        before = fr.dump()

        site.publish({})
        blocked = run_refresh("docs")
        assert blocked["status"] == "blocked" and blocked["message"].startswith("change_spike: ")
        assert fr.dump() == before


def test_any_tier_run_indexes_a_new_page(dagster_home: Path) -> None:
    docs = generate(2, sections_per_page=1, seed=34).markdown()
    with DocsSite() as site:
        fr = Freshness(
            dagster_home / "sources.yaml",
            site.sitemap_url,
            source_settings={"tiers": {"rules": [{"pattern": "/changelog", "tier": "hot"}]}},
        )
        site.publish(docs)
        assert fr.run()["new"] == 2
        docs["guide/fresh.md"] = generate(1, sections_per_page=1, seed=35).markdown()["guide/page0.md"]
        site.publish(docs)
        hot = json_run(fr, "--tier", "hot")
        assert (hot["crawled"], hot["new"], hot["embedded"]) == (1, 1, 1)  # only the new page


def json_run(fr: Freshness, *args: str) -> dict:
    import json

    return json.loads(fr.cli("run", "--json", *args).strip().splitlines()[-1])
