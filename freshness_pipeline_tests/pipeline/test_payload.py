"""Meaning, not markup, end to end through `freshness run` on a loopback site: dates,
build stamps and link targets never cost an embedding; a link edit is a payload update
that `dump` and `search` show at once (LanceDB, and Pinecone through the real SDK
against the stand-in)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate, paragraph
from freshness_pipeline_tests.standins.pinecone_standin import PineconeStandIn

KEY = "pc-e2e-key-not-a-secret"
HOME = paragraph(random.Random(1), 80)  # long enough not to be flagged as a near-empty page


def quiet(counts: dict) -> tuple[int, int, int, int]:
    return counts["embedded"], counts["upserted"], counts["deleted"], counts["payload_updated"]


def test_a_redeploy_stamping_every_article_embeds_nothing_and_succeeds(dagster_home: Path) -> None:
    docs = generate(30, sections_per_page=3, seed=11).markdown()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)  # default checks: the spike guard on
        site.publish(docs, noise=lambda path: {"date": "2025-03-04"})
        assert fr.run()["embedded"] == 90
        before = fr.dump()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        site.publish(docs, noise=lambda path: {"date": "2025-03-04", "updated": now})  # "Last updated: <now>"
        assert quiet(fr.run()) == (0, 0, 0, 0)
        site.publish(docs, noise=lambda path: {"updated": now, "build": f"with mkdocs 1.6.1 on {now} (build #4712)"})
        counts = fr.run()  # success is asserted by the driver: no check blocked it
        assert quiet(counts) == (0, 0, 0, 0) and not counts["checks"], counts
        assert fr.dump() == before  # as_of too: a date moves only with the text


def changelog(entries: list[tuple[str, str]]) -> dict[str, str]:
    body = "\n\n".join(f"## {version}\n\nReleased {day}. {text}" for version, day, text in entries)
    return {"changelog.md": f"# Changelog\n\n{body}\n", "index.md": f"# Home\n\n{HOME}\n"}


def test_a_page_of_hundreds_of_sections_gaining_one_entry_embeds_only_it(dagster_home: Path) -> None:
    rng = random.Random(3)
    entries = [(f"1.{i}.0", f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}", paragraph(rng, 30)) for i in range(300)][::-1]
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(changelog(entries))
        assert fr.run()["embedded"] == 301
        entries.insert(0, ("2.0.0", "2026-11-30", paragraph(rng, 30)))  # the newest entry, on top
        site.publish(changelog(entries))
        counts = fr.run()
        assert quiet(counts) == (1, 1, 0, 0), counts
        (record,) = [r for r in fr.dump() if r["heading_path"] == "Changelog > 2.0.0"]
        assert record["as_of"] == time.strftime("%Y-%m")  # no declared date: the month first seen


@pytest.fixture
def pinecone(monkeypatch: pytest.MonkeyPatch) -> Iterator[PineconeStandIn]:
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    with PineconeStandIn(api_key=KEY) as server:
        yield server


def use_pinecone(fr: Freshness, host: str) -> None:
    cfg = yaml.safe_load(fr.sources.read_text())
    cfg["vector_store"] = {"provider": "pinecone", "host": host}
    fr.sources.write_text(yaml.safe_dump(cfg))


@pytest.mark.parametrize("store", ["lancedb", "pinecone"])
def test_a_link_target_edit_embeds_nothing_and_shows_the_new_link(
    store: str, dagster_home: Path, request: pytest.FixtureRequest
) -> None:
    text = "Uploads are retried after a network error; read the retry guide for the limits and the backoff."
    page = "# Uploads\n\n" + HOME + "\n\n## Retries\n\n{text} See [the retry guide]({target}) for details.\n"
    docs = {"uploads.md": page.format(text=text, target="/guide/retries-old/")}
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        if store == "pinecone":
            use_pinecone(fr, request.getfixturevalue("pinecone").host)
        site.publish(docs, noise=lambda path: {"date": "2025-05-06"})
        assert fr.run()["embedded"] == 2
        docs["uploads.md"] = page.format(text=text, target="/guide/retries/")
        site.publish(docs, noise=lambda path: {"date": "2026-01-02"})
        assert quiet(fr.run()) == (0, 0, 0, 1)
        (record,) = [r for r in fr.dump() if r["heading_path"] == "Uploads > Retries"]
        assert f"({site.base_url}/guide/retries/)" in record["text"] and "retries-old" not in record["text"]
        assert record["as_of"] == "2025-05-06"  # the words did not change, nor does their date
        (hit,) = json.loads(fr.cli("search", text, "-k", "1", "--json"))
        assert hit["text"] == record["text"] and hit["as_of"] == "2025-05-06" and hit["start"] is not None
        assert "as of 2025-05-06" in fr.cli("search", text, "-k", "1")


def test_a_redeploy_turning_curly_quotes_straight_embeds_nothing(dagster_home: Path) -> None:
    """Smart quotes switched off (or on) between builds: the same words to embed, so no
    embedding and no change spike; the records show the text as now served."""
    rng = random.Random(5)
    curly = {
        f"guide/p{i}.md": f"# Page {i}\n\n## It’s “quoted”\n\n{paragraph(rng, 40)} It’s the “smart” one – or…"
        f" — so they’re said.\n\n## Other\n\n{paragraph(rng, 40)} Don’t.\n"
        for i in range(20)
    }
    straight = {
        rel: md.replace("’", "'").replace("“", '"').replace("”", '"').replace("–", "--").replace("…", "...")
        for rel, md in curly.items()
    }
    straight = {rel: md.replace("—", "---") for rel, md in straight.items()}
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)  # default checks: the spike guard on
        site.publish(curly)
        assert fr.run()["embedded"] == 40
        for _ in range(2):  # quiet runs: the spike check's history
            assert quiet(fr.run()) == (0, 0, 0, 0)
        site.publish(straight)
        counts = fr.run()  # success is asserted by the driver: no check blocked it
        assert counts["embedded"] == counts["upserted"] == counts["deleted"] == 0 and not counts["checks"], counts
        texts = " ".join(r["text"] for r in fr.dump())
        assert 'It\'s the "smart" one -- or...' in texts and "’" not in texts
