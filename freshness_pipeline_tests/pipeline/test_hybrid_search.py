"""Hybrid search end to end through `freshness run` on a loopback site: the full-text part
finds a section by an exact identifier, never shows the old words of a changed section, a
removed section, or the old payload of a section whose links changed, and `freshness
search --explain` says which part found each result."""

from __future__ import annotations

import json
import random
from pathlib import Path

from freshness_pipeline.config import load_settings
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.search import search
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import paragraph

RNG = random.Random(7)
FILLER = [paragraph(RNG, 60) for _ in range(6)]


def site(tuning: str, limits: str | None, proxies_link: str) -> dict[str, str]:
    limits_part = f"## Limits\n\n{FILLER[1]} The narwhal_pool_limit caps connections.\n\n" if limits else ""
    return {
        "index.md": f"# Home\n\n{FILLER[0]}\n",
        "guide.md": (
            f"# Guide\n\n## Tuning\n\n{FILLER[2]} {tuning}\n\n{limits_part}"
            f"## Proxies\n\n{FILLER[3]} Set axolotl_proxy_mode, see [the proxy page]({proxies_link}).\n"
        ),
        "other.md": f"# Other\n\n{FILLER[4]}\n\n## More\n\n{FILLER[5]}\n",
    }


def texts(sources: Path, query: str, mode: str) -> list[str]:
    return [r.text for r in search(load_settings(sources), query, k=10, record=False, mode=mode)]  # type: ignore[arg-type]


def test_full_text_results_never_show_a_changed_removed_or_payload_only_sections_old_text(dagster_home: Path) -> None:
    with DocsSite() as docs:
        fr = Freshness(
            dagster_home / "sources.yaml", docs.sitemap_url, source_settings={"checks": {"spike_min_share": 1.0}}
        )
        docs.publish(site("Raise zebrafish_retry_budget for slow hosts.", "yes", "/old-proxy/"))
        fr.run()
        assert any("zebrafish_retry_budget" in t for t in texts(fr.sources, "zebrafish_retry_budget", "text"))
        assert any("narwhal_pool_limit" in t for t in texts(fr.sources, "narwhal_pool_limit", "text"))

        docs.publish(site("Raise quokka_retry_budget for slow hosts.", None, "/new-proxy/"))
        counts = fr.run()
        assert counts["payload_updated"] >= 1 and counts["deleted"] >= 1, counts
        for mode in ("text", "hybrid"):
            found = texts(
                fr.sources, "zebrafish_retry_budget narwhal_pool_limit quokka_retry_budget axolotl_proxy_mode", mode
            )
            shown = "\n".join(found)
            assert "zebrafish" not in shown and "narwhal" not in shown and "/old-proxy/" not in shown, (mode, found)
            assert sum("quokka_retry_budget" in t for t in found) == 1, (mode, found)
            assert sum("axolotl_proxy_mode" in t and "/new-proxy/" in t for t in found) == 1, (mode, found)
        assert texts(fr.sources, "narwhal zebrafish old", "text") == []  # words only the old texts had


def test_search_explain_says_which_part_found_each_result(dagster_home: Path) -> None:
    with DocsSite() as docs:
        fr = Freshness(dagster_home / "sources.yaml", docs.sitemap_url)
        docs.publish(site("Raise zebrafish_retry_budget for slow hosts.", "yes", "/old-proxy/"))
        fr.run()
        hits = json.loads(fr.cli("search", "zebrafish_retry_budget", "-k", "3", "--explain", "--json"))
        assert "Tuning" in hits[0]["heading_path"]
        assert "text #1 (bm25 " in hits[0]["explain"], hits[0]
        assert all(h["explain"] and ("vector #" in h["explain"] or "text #" in h["explain"]) for h in hits), hits
        plain = json.loads(fr.cli("search", "zebrafish_retry_budget", "-k", "3", "--json"))
        assert [h["id"] for h in plain] == [h["id"] for h in hits] and plain[0]["explain"] is None
        table = fr.cli("search", "zebrafish_retry_budget", "-k", "3", "--explain")
        assert "found by" in table and "text #1" in table


def test_a_reindex_brings_its_own_full_text_index_and_drops_the_old_one(dagster_home: Path) -> None:
    """Blue/green: the new version's table is written, searched by words before it becomes
    active (the golden gate reads it), switched in the commit, and the old table with its
    full-text index is dropped."""
    with DocsSite() as docs:
        fr = Freshness(dagster_home / "sources.yaml", docs.sitemap_url)
        docs.publish(site("Raise zebrafish_retry_budget for slow hosts.", "yes", "/old-proxy/"))
        fr.run()
        docs.publish(site("Raise quokka_retry_budget for slow hosts.", "yes", "/old-proxy/"))
        fr.configure(chunking={"token_budget": 60})  # a chunker change: a full re-index
        counts = fr.run()
        assert "chunker" in (counts["reindex_reason"] or ""), counts
        found = texts(fr.sources, "zebrafish quokka", "text")
        assert found and all("quokka_retry_budget" in t for t in found), found
        explained = json.loads(fr.cli("search", "quokka", "--explain", "--json"))
        assert "text #1" in explained[0]["explain"] and "quokka" in explained[0]["text"]
        tables = sorted(p.name for p in (dagster_home / "vectors").iterdir())
        assert tables == ["docs-v2.lance"], tables
