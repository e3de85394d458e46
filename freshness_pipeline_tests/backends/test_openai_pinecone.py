"""The whole pipeline on the production backends: `freshness run` (Dagster) with the real
`openai` and `pinecone` SDKs against the stand-ins, through 429s, 5xx, timeouts, a partly
applied upsert and a run that dies when the embedding service gives up. The index ends
equal to the live site, reconcile is clean, and no text is paid for twice."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.cli import main
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.sitegen import Site, generate, paragraph
from freshness_pipeline_tests.standins.openai_standin import OpenAIStandIn
from freshness_pipeline_tests.standins.pinecone_standin import PineconeStandIn

KEY = "sk-e2e-secret-7d1f"  # both services; must never appear in logs or output


class ArmedOpenAI(OpenAIStandIn):
    """Injected faults wait until `arm_after` requests were served (a mid-run failure)."""

    arm_after = 0

    def _take_fault(self, path: str) -> int | str | None:
        return super()._take_fault(path) if self.embedding_requests >= self.arm_after else None


@pytest.fixture
def services(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ArmedOpenAI, PineconeStandIn]]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    with (
        ArmedOpenAI(api_key=KEY, retry_after=0.05, hang_s=2.0) as openai,
        PineconeStandIn(api_key=KEY, hang_s=2.0) as pinecone,
    ):
        yield openai, pinecone


def texts(site: Site) -> set[tuple[str, str]]:
    """What the embedder sees of each section: its heading path and its words."""
    return {(path, t) for _, path, t in site.expected("")}


def cli(capsys: pytest.CaptureFixture[str], sources: Path, *args: str) -> tuple[int, str]:
    code = main(["--sources", str(sources), *args])
    out, err = capsys.readouterr()
    assert KEY not in out + err
    return code, out


def run(capsys: pytest.CaptureFixture[str], sources: Path) -> dict:
    _, out = cli(capsys, sources, "run", "--json")
    return json.loads(out.strip().splitlines()[-1])


def index_equals(capsys: pytest.CaptureFixture[str], sources: Path, site: Site, base_url: str) -> None:
    code, out = cli(capsys, sources, "dump")
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    got = [(r["url"], r["heading_path"], r["text"]) for r in records]
    assert len(got) == len(set(got)) and set(got) == site.expected(base_url)
    code, out = cli(capsys, sources, "reconcile", "--json")
    assert code == 0 and json.loads(out)["clean"], out


def test_openai_and_pinecone_through_faults(
    dagster_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    services: tuple[ArmedOpenAI, PineconeStandIn],
) -> None:
    openai, pinecone = services
    v1 = generate(8, sections_per_page=3, seed=5)
    v2 = Site(copy.deepcopy(v1.pages))
    rng = random.Random(6)
    for rel in ("guide/page1.md", "guide/page3.md", "guide/page6.md"):
        v2.pages[rel][1] = (v2.pages[rel][1][0], paragraph(rng))  # edited
    heading, text = v2.pages["guide/page2.md"][0]
    v2.pages["guide/page2.md"][0] = (heading + " renamed", text)  # renamed: a new heading path
    v2.pages["moved/page4.md"] = v2.pages.pop("guide/page4.md")  # moved, under a new title
    del v2.pages["guide/page7.md"]
    v2.pages["guide/added.md"] = [(f"Added {i}", paragraph(rng)) for i in range(6)]

    with DocsSite() as site:
        sources = tmp_path / "sources.yaml"
        sources.write_text(
            yaml.safe_dump(
                {
                    # Two of eight pages go in v2: no quarantine (the bad-minute suite's subject).
                    "sources": [
                        {"name": "docs", "sitemap": site.sitemap_url, "fetch": {"quarantine": {"gone": {"confirm": 0}}}}
                    ],
                    "embedder": {
                        "provider": "openai",
                        "base_url": openai.base_url,
                        "dimensions": 64,
                        "batch_size": 4,
                        "timeout_s": 0.5,
                    },
                    "vector_store": {
                        "provider": "pinecone",
                        "host": pinecone.host,
                        "upsert_batch": 10,
                        "timeout_s": 0.5,
                    },
                }
            )
        )
        site.publish(v1.markdown())
        openai.faults.extend([("embeddings", 429), ("embeddings", 500), ("embeddings", "hang")])
        pinecone.faults.extend(
            [
                ("vectors/upsert", 429),
                ("vectors/upsert", "partial"),
                ("vectors/upsert", 503),
                ("vectors/upsert", "hang"),
            ]
        )
        first = run(capsys, sources)
        assert first["status"] == "success", first
        assert not openai.faults and not pinecone.faults
        assert first["embedded"] == openai.inputs_embedded == len(texts(v1))
        assert max(n for n, _ in openai.batches) <= 4
        index_equals(capsys, sources, v1, site.base_url)

        # v2: the embedding service gives up after the first request -> the run fails with
        # the manifest and the index untouched, and that batch kept in the cache.
        site.publish(v2.markdown())
        paid_before = openai.inputs_embedded
        openai.arm_after = openai.embedding_requests + 1
        openai.faults.extend([("embeddings", 429)] * 6)  # the SDK's 5 retries, then failure
        failed = run(capsys, sources)
        assert failed["status"] == "failure" and "vector_index" in failed["message"]
        assert openai.inputs_embedded - paid_before == 4  # one batch made it
        index_equals(capsys, sources, v1, site.base_url)

        openai.faults.clear()
        pinecone.faults.extend([("vectors/upsert", "partial"), ("vectors/delete", 500), ("vectors/upsert", "hang")])
        second = run(capsys, sources)
        assert second["status"] == "success", second
        assert not pinecone.faults
        index_equals(capsys, sources, v2, site.base_url)
        # Across the failed and the good run: exactly the texts v1 did not have.
        assert openai.inputs_embedded - paid_before == len(texts(v2) - texts(v1))
        assert second["embedded"] == len(texts(v2) - texts(v1)) - 4

    for run_record in dg.DagsterInstance.get().get_run_records():
        for event in dg.DagsterInstance.get().all_logs(run_record.dagster_run.run_id):
            assert KEY not in str(event)


def test_reconcile_finds_and_fixes_drift_in_pinecone(
    dagster_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    services: tuple[ArmedOpenAI, PineconeStandIn],
) -> None:
    openai, pinecone = services
    v1 = generate(4, sections_per_page=3, seed=8)
    with DocsSite() as site:
        sources = tmp_path / "sources.yaml"
        sources.write_text(
            yaml.safe_dump(
                {
                    # Two of eight pages go in v2: no quarantine (the bad-minute suite's subject).
                    "sources": [
                        {"name": "docs", "sitemap": site.sitemap_url, "fetch": {"quarantine": {"gone": {"confirm": 0}}}}
                    ],
                    "embedder": {"provider": "openai", "base_url": openai.base_url, "dimensions": 32},
                    "vector_store": {"provider": "pinecone", "host": pinecone.host},
                }
            )
        )
        site.publish(v1.markdown())
        assert run(capsys, sources)["status"] == "success"
        paid = openai.inputs_embedded

        held = pinecone.namespaces["docs-v1"]
        ids = sorted(held)
        lost = ids[0]
        del held[lost]  # missing
        values, meta = held[ids[1]]
        held[ids[1]] = (values, {**meta, "content_hash": "not-what-the-manifest-says"})  # mismatched
        held["stray:0"] = (values, {**meta, "content_hash": "x"})  # orphan

        code, out = cli(capsys, sources, "reconcile", "--json")
        report = json.loads(out)
        assert code == 1 and not report["clean"]
        assert (report["orphans"], report["missing"], report["mismatched"]) == (["stray:0"], [lost], [ids[1]])

        code, out = cli(capsys, sources, "reconcile", "--fix", "--json")
        assert code == 0 and json.loads(out)["fixed"] == 3
        index_equals(capsys, sources, v1, site.base_url)
        assert openai.inputs_embedded == paid  # repaired from the embedding cache
