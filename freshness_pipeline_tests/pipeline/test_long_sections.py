"""A long page through `freshness run`: a generated table of 300 settings under one heading.
A row inserted on top, one edited in the middle and one deleted near the end each cost the
chunk that holds them; every other record keeps its id, text and vector. A re-index (here:
a new token budget) cuts the page afresh."""

from __future__ import annotations

from pathlib import Path

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness

WORDS = ["timeout", "pool", "proxy", "cache", "retries", "cookies", "verify", "limits"]


def settings_page(rows: list[str]) -> dict[str, str]:
    table = "| name | default | meaning |\n| --- | --- | --- |\n" + "\n".join(rows)
    return {
        "index.md": "# Home\n\nSee [the settings](settings.md).\n",
        "settings.md": f"# Settings\n\n## Every setting\n\nEach setting, its default and meaning.\n\n{table}\n",
    }


def row(i: int, tag: str = "") -> str:
    return f"| `{WORDS[i % 8]}_{i}{tag}` | {i * 7 % 100} | how long the {WORDS[i * 3 % 8]} waits, number {i} |"


def records(fr: Freshness) -> dict[str, tuple[str, str]]:
    return {r["id"]: (r["content_hash"], r["text"]) for r in fr.dump() if "settings" in r["url"]}


def test_an_edit_in_a_long_table_costs_the_chunk_that_holds_it(dagster_home: Path) -> None:
    rows = [row(i) for i in range(300)]
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(settings_page(rows))
        first = fr.run()
        before = records(fr)
        assert first["errors"] == 0 and len(before) > 10, (first, len(before))

        for change in ("insert", "edit", "delete"):
            if change == "insert":
                rows.insert(0, row(1000))
            elif change == "edit":
                rows[150] = row(150, "_renamed")
            else:
                del rows[280]
            site.publish(settings_page(rows))
            counts = fr.run()
            after = records(fr)
            assert (counts["embedded"], counts["upserted"], counts["deleted"]) == (1, 1, 0), (change, counts)
            changed = {i for i in after if after[i] != before.get(i)}
            assert len(changed) == 1 and set(before) - set(after) == set(), change
            assert all(after[i] == before[i] for i in before if i not in changed), change
            before = after

        fr.configure(chunking={"token_budget": 300})  # a re-index: every page cut afresh
        reindexed = fr.run()
        assert reindexed["reindex_reason"] and reindexed["errors"] == 0, reindexed
        fresh = records(fr)
        assert set(fresh) != set(before) and all(fresh.values())
