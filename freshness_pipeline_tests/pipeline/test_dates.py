"""Page dates through `freshness run`: every section embeds its page's month ("as of Jun
2026"), taken from the page's date metadata; re-dating within the month changes nothing,
into another month re-embeds that page only."""

from __future__ import annotations

import hashlib
from pathlib import Path

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate


def embedded_as_of(record: dict) -> str | None:
    """The month header the record's vector was embedded with, read back from its hash."""
    for month in ("Jun 2026", "Jul 2026"):
        if hashlib.sha256(f"(as of {month})\n\n{record['text']}".encode()).hexdigest() == record["content_hash"]:
            return month
    return None


def months(records: list[dict]) -> dict[str, set[str | None]]:
    out: dict[str, set[str | None]] = {}
    for r in records:
        out.setdefault(r["url"].rsplit("/", 1)[1], set()).add(embedded_as_of(r))
    return out


def test_sections_carry_the_month_of_their_page(dagster_home: Path) -> None:
    docs = generate(3, sections_per_page=2, seed=6).markdown()
    dates = {"/guide/page0/": "2026-06-03", "/guide/page1/": "2026-06-03", "/guide/page2/": "2026-06-15"}
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs, noise=lambda path: {"date": dates[path]})
        assert fr.run()["embedded"] == 6
        records = fr.dump()
        assert months(records) == {"page0": {"Jun 2026"}, "page1": {"Jun 2026"}, "page2": {"Jun 2026"}}

        dates.update({"/guide/page0/": "2026-06-28", "/guide/page2/": "2026-06-01"})  # same month
        site.publish(docs, noise=lambda path: {"date": dates[path]})
        c = fr.run()
        assert (c["upserted"], c["embedded"], c["deleted"]) == (0, 0, 0), c

        dates["/guide/page1/"] = "2026-07-02"  # into another month: that page's sections only
        site.publish(docs, noise=lambda path: {"date": dates[path]})
        c = fr.run()
        assert (c["upserted"], c["embedded"], c["deleted"]) == (2, 2, 0), c
        after = fr.dump()
        assert months(after) == {"page0": {"Jun 2026"}, "page1": {"Jul 2026"}, "page2": {"Jun 2026"}}
        untouched = {r["id"]: r for r in records if "/page1" not in r["url"]}
        assert {r["id"]: r for r in after if "/page1" not in r["url"]} == untouched


def test_a_build_stamp_is_not_a_page_date(dagster_home: Path) -> None:
    docs = generate(2, sections_per_page=2, seed=8).markdown()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs, noise=lambda path: {"build": "with mkdocs on 2026-06-30T23:59:00Z"})
        fr.run()
        site.publish(docs, noise=lambda path: {"build": "with mkdocs on 2026-07-01T00:01:00Z"})
        c = fr.run()
        assert (c["upserted"], c["embedded"]) == (0, 0), c
