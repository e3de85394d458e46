"""Identity vs content through `freshness run`: a renamed heading is embedded once (the
heading path is part of the retrieval text), writes a key redirect, touches nothing else,
and `freshness resolve OLD_KEY` finds the section.
(Moved pages, via HTTP redirects, are in test_fetch_policy.py.)"""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate, paragraph

PAGE = "guide/page1.md"


def by_heading(records: list[dict]) -> dict[str, dict]:
    out = {r["heading_path"]: r for r in records}
    assert len(out) == len(records), "two records under one heading path"
    return out


def test_renaming_one_heading_reembeds_nothing_else(dagster_home: Path) -> None:
    v1 = generate(3, sections_per_page=3, seed=5)
    heading, text = v1.pages[PAGE][1]
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(v1.markdown())
        fr.run()
        before = by_heading(fr.dump())
        old = before.pop(f"Guide Page1 > {heading}")

        # Renamed, text untouched: the embedder sees the heading path, so that one section is
        # embedded again (and nothing else), and the old key redirects.
        v2 = copy.deepcopy(v1)
        v2.pages[PAGE][1] = (f"{heading} explained", text)
        site.publish(v2.markdown())
        c = fr.run()
        assert (c["embedded"], c["upserted"], c["deleted"], c["sections_moved"]) == (1, 1, 1, 0), c
        after = by_heading(fr.dump())
        renamed = after.pop(f"Guide Page1 > {heading} explained")
        assert after == before, "a record other than the renamed one changed"
        assert renamed["text"] == old["text"] and renamed["content_hash"] != old["content_hash"]
        assert renamed["key"] != old["key"]

        found = fr.resolve(old["key"])
        assert (found["key"], found["redirects"], found["text"]) == (renamed["key"], [old["key"]], text)
        shown = fr.cli("resolve", old["key"])
        assert f"[Guide Page1 > {heading} explained]" in shown and text in shown

        # Renamed again, at the same place, and its text edited: embedded once, and the
        # first key follows both hops to the current section.
        edited = paragraph(random.Random(99))
        v3 = copy.deepcopy(v2)
        v3.pages[PAGE][1] = (f"{heading} explained again", edited)
        site.publish(v3.markdown())
        c = fr.run()
        assert (c["embedded"], c["upserted"], c["deleted"]) == (1, 1, 1), c
        after = by_heading(fr.dump())
        current = after.pop(f"Guide Page1 > {heading} explained again")
        assert after == before
        found = fr.resolve(old["key"])
        assert (found["key"], found["redirects"], found["text"]) == (
            current["key"],
            [old["key"], renamed["key"]],
            edited,
        )


def test_a_section_split_under_new_headings_redirects_its_key_once(
    dagster_home: Path, any_state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long section (two chunks) becomes two headed sections holding the same two texts:
    both are embedded under their new headings and the old key redirects to where its first
    chunk went, once (two rows for one key would break the manifest commit on Postgres)."""
    monkeypatch.setenv("FRESHNESS_STATE_URL", any_state_url)
    rng = random.Random(21)
    first, second = paragraph(rng), paragraph(rng)
    with DocsSite() as site:
        fr = Freshness(
            dagster_home / "sources.yaml", site.sitemap_url, source_settings={"chunking": {"token_budget": 70}}
        )
        site.publish({"guide.md": f"# Guide\n\n## Setup\n\n{first}\n\n{second}\n"})
        fr.run()
        (old_key,) = {r["key"] for r in fr.dump()}

        site.publish({"guide.md": f"# Guide\n\n## Setup: part one\n\n{first}\n\n## Setup: part two\n\n{second}\n"})
        c = fr.run()
        assert (c["embedded"], c["upserted"], c["deleted"], c["sections_moved"]) == (2, 2, 2, 0), c
        found = fr.resolve(old_key)
        assert (found["heading_path"], found["text"], found["redirects"]) == (
            "Guide > Setup: part one",
            first,
            [old_key],
        )


def test_a_page_split_under_new_titles_embeds_each_section_once(dagster_home: Path) -> None:
    """One page becomes two, each section under a new page title with its heading and text:
    the vector text starts with the page title, so each section is embedded once more (what
    `bench/long_pages.py` counts for a split) and the old page's records go."""
    rng = random.Random(8)
    network, storage = paragraph(rng), paragraph(rng)
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish({"settings.md": f"# Settings\n\n## Proxy\n\n{network}\n\n## Disk\n\n{storage}\n"})
        fr.run()
        site.publish(
            {
                "settings/network.md": f"# Network settings\n\n## Proxy\n\n{network}\n",
                "settings/storage.md": f"# Storage settings\n\n## Disk\n\n{storage}\n",
            }
        )
        c = fr.run()
        assert (c["embedded"], c["upserted"], c["deleted"], c["sections_moved"]) == (2, 2, 2, 0), c
        after = by_heading(fr.dump())
        assert {h: r["text"] for h, r in after.items()} == {
            "Network settings > Proxy": network,
            "Storage settings > Disk": storage,
        }
