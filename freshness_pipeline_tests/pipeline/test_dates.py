"""Page dates through `freshness run`: a date is payload. Each record carries `as_of`, the
page's declared date when its text last changed; re-dating a page, into any month, embeds
and writes nothing; an edit dates only the sections it changed."""

from __future__ import annotations

from pathlib import Path

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate


def as_of(records: list[dict]) -> dict[str, set[str | None]]:
    out: dict[str, set[str | None]] = {}
    for r in records:
        out.setdefault(r["url"].rsplit("/", 1)[1], set()).add(r["as_of"])
    return out


def test_a_date_is_payload_that_moves_only_with_text(dagster_home: Path) -> None:
    site_docs = generate(3, sections_per_page=2, seed=6)
    docs = site_docs.markdown()
    dates = {"/guide/page0/": "2026-06-03", "/guide/page1/": "2026-06-03", "/guide/page2/": "2026-06-15"}
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs, noise=lambda path: {"date": dates[path]})
        assert fr.run()["embedded"] == 6
        records = fr.dump()
        assert as_of(records) == {"page0": {"2026-06-03"}, "page1": {"2026-06-03"}, "page2": {"2026-06-15"}}

        dates.update({"/guide/page0/": "2026-06-28", "/guide/page1/": "2026-09-02"})  # any month
        site.publish(docs, noise=lambda path: {"date": dates[path]})
        c = fr.run()
        assert (c["upserted"], c["embedded"], c["deleted"], c["payload_updated"]) == (0, 0, 0, 0), c
        assert fr.dump() == records

        heading, text = site_docs.pages["guide/page1.md"][1]
        docs["guide/page1.md"] = docs["guide/page1.md"].replace(text, text + " Now also on phones.")
        site.publish(docs, noise=lambda path: {"date": dates[path]})
        c = fr.run()
        assert (c["upserted"], c["embedded"], c["deleted"]) == (1, 1, 0), c
        after = {r["heading_path"]: r["as_of"] for r in fr.dump() if r["url"].endswith("/page1")}
        assert sorted(after.values()) == ["2026-06-03", "2026-09-02"]  # only the edited one moved
        assert after[f"Guide Page1 > {heading}"] == "2026-09-02"


def test_a_build_stamp_is_not_a_page_date(dagster_home: Path) -> None:
    docs = generate(2, sections_per_page=2, seed=8).markdown()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs, noise=lambda path: {"build": "with mkdocs on 2026-06-30T23:59:00Z"})
        fr.run()
        site.publish(docs, noise=lambda path: {"build": "with mkdocs on 2026-07-01T00:01:00Z"})
        c = fr.run()
        assert (c["upserted"], c["embedded"]) == (0, 0), c
