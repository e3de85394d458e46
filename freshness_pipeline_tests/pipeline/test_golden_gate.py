"""Before a re-indexed version becomes active, the source's golden set runs against it:
its scores land in the run's counts, and under `checks.golden_min_hit5` the switch is
refused with the active index left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate


def test_golden_set_gates_the_switch_to_a_reindexed_version(dagster_home: Path) -> None:
    site_docs = generate(3, sections_per_page=2, seed=21)
    golden = dagster_home / "golden.yaml"
    # Hashing embeddings: a section's own text finds it first.
    queries = [
        {"query": text, "expect": f"/{rel.removesuffix('.md')}/"}
        for rel, secs in site_docs.pages.items()
        for _, text in secs[:1]
    ]
    golden.write_text(yaml.safe_dump(queries))
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url, source_settings={"golden_set": str(golden)})
        site.publish(site_docs.markdown())
        fr.run()
        before = fr.dump()

        # A query no version can answer, and a floor of a perfect hit@5.
        golden.write_text(yaml.safe_dump([*queries, {"query": "nothing like it", "expect": "/no-such-page/"}]))
        fr.configure(embedder={"provider": "hashing", "dimensions": 128}, checks={"golden_min_hit5": 1.0})
        out = fr.cli("run", "--json", expect=1)
        failed = json.loads(out.strip().splitlines()[-1])
        assert failed["status"] == "failure"
        assert "under checks.golden_min_hit5 1.00; the active index is unchanged" in failed["message"]
        assert fr.dump() == before  # searches still read version 1

        golden.write_text(yaml.safe_dump(queries))
        fr.configure(checks={"golden_min_hit5": 0.9})
        counts = fr.run()
        assert "dimensions 256 -> 128" in counts["reindex_reason"]
        assert counts["golden_hit_at_1"] == counts["golden_hit_at_5"] == 1.0
        assert {r["id"] for r in fr.dump()} == {r["id"] for r in before}
        assert {r["index_version"] for r in fr.dump()} == {2}
