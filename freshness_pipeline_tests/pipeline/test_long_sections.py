"""A long page through `freshness run`: a generated table of 300 settings under one heading.
A row inserted on top, one edited in the middle and one deleted near the end each replace
only a run of neighbouring chunks around it (its first-level group and at most one
neighbour); every other record keeps its id, text and vector. The index then holds what a
fresh index of the same text holds: no chunk depends on the page's history. A re-index (here:
a new token budget) cuts the page anew."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def records(fr: Freshness) -> list[dict[str, Any]]:
    """The settings page's records (the chunks of its one section) in order."""
    out = sorted((r for r in fr.dump() if "settings" in r["url"]), key=lambda r: r["chunk_index"])
    assert len({r["key"] for r in out}) == 1
    return out


def replaced(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[int]:
    """Positions of the records of `old` that `new` does not hold with the same id and text."""
    held = {(r["id"], r["content_hash"], r["text"]) for r in new}
    return [i for i, r in enumerate(old) if (r["id"], r["content_hash"], r["text"]) not in held]


def test_an_edit_in_a_long_table_costs_only_the_chunks_around_it(dagster_home: Path) -> None:
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
            lost, fresh = replaced(before, after), replaced(after, before)
            assert lost and lost == list(range(lost[0], lost[0] + len(lost))), (change, lost)
            assert fresh and fresh == list(range(fresh[0], fresh[0] + len(fresh))), (change, fresh)
            assert len(before) - len(lost) == len(after) - len(fresh), change  # the rest: the same records
            gone = {r["id"] for r in before} - {r["id"] for r in after}
            assert (counts["upserted"], counts["deleted"]) == (len(fresh), len(gone)), (change, counts)
            assert 0 < counts["embedded"] <= len(fresh) < len(after) // 2, (change, counts)
            before = after

        # The same text indexed at once, in its own namespace: the same records.
        once = Freshness(dagster_home / "once.yaml", site.sitemap_url, name="once")
        once.run()
        assert [(r["id"], r["content_hash"], r["text"]) for r in records(once)] == [
            (r["id"], r["content_hash"], r["text"]) for r in before
        ]

        fr.configure(chunking={"token_budget": 200})  # a re-index: every page cut anew, smaller
        reindexed = fr.run()
        assert reindexed["reindex_reason"] and reindexed["errors"] == 0, reindexed
        cut = records(fr)
        assert len(cut) > len(before) and all(r["text"] for r in cut)
