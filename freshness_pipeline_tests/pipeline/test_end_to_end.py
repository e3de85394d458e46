"""Two versions of a generated site through `freshness run` (Dagster, LanceDB, the
hashing embedder): exact embed/delete counts, and `freshness dump` equals the live site."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
import yaml

from freshness_pipeline.cli import main
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.sitegen import Site, generate, paragraph


def write_sources(path: Path, sitemap: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "docs", "sitemap": sitemap}],
                "embedder": {"provider": "hashing"},
            }
        )
    )
    return path


def run_json(capsys: pytest.CaptureFixture[str], sources: Path) -> dict:
    assert main(["--sources", str(sources), "run", "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def dump(capsys: pytest.CaptureFixture[str], sources: Path) -> list[dict]:
    assert main(["--sources", str(sources), "dump"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def assert_index_equals(records: list[dict], site: Site, base_url: str) -> None:
    got = [(r["url"], r["heading_path"], r["text"]) for r in records]
    assert len(got) == len(set(got)), "duplicate records in the index"
    assert len({r["id"] for r in records}) == len(records)
    assert set(got) == site.expected(base_url)


def test_two_versions_then_a_quiet_run(dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v1 = generate(6, sections_per_page=3, seed=1)
    v2 = Site(copy.deepcopy(v1.pages))
    rng = random.Random(7)
    p0 = v2.pages["guide/page0.md"]
    p0[1] = (p0[1][0], paragraph(rng))  # one section edited
    p0.insert(0, ("Inserted topic", paragraph(rng)))  # one section inserted near the top
    del v2.pages["guide/page5.md"]  # one page removed: 404
    v2.pages["guide/added.md"] = [("Fresh one", paragraph(rng)), ("Fresh two", paragraph(rng))]

    with DocsSite() as site:
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        site.publish(v1.markdown())
        first = run_json(capsys, sources)
        assert first["status"] == "success"
        assert (first["crawled"], first["new"], first["embedded"], first["deleted"]) == (6, 6, 18, 0)
        assert_index_equals(dump(capsys, sources), v1, site.base_url)

        site.publish(v2.markdown())
        second = run_json(capsys, sources)
        # crawled: 6 in the sitemap + the removed page re-checked directly.
        assert (second["crawled"], second["new"], second["changed"], second["gone"]) == (7, 1, 1, 1)
        assert second["embedded"] == 1 + 1 + 2  # edited + inserted + the new page's two
        assert second["deleted"] == 3  # the removed page's sections
        assert second["unchanged"] == 4
        assert_index_equals(dump(capsys, sources), v2, site.base_url)

        third = run_json(capsys, sources)
        assert (third["embedded"], third["upserted"], third["deleted"]) == (0, 0, 0)
        assert third["new"] == third["changed"] == third["gone"] == 0
        assert_index_equals(dump(capsys, sources), v2, site.base_url)

    # The runs are in the Dagster instance, as the UI shows them.
    import dagster as dg

    runs = dg.DagsterInstance.get().get_runs()
    assert len(runs) == 3 and all(r.is_success for r in runs)


def test_search_status_and_resolve(dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site_v1 = generate(3, sections_per_page=2, seed=3)
    with DocsSite() as site:
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        site.publish(site_v1.markdown())
        run_json(capsys, sources)
        heading, text = site_v1.pages["guide/page1.md"][1]

        assert main(["--sources", str(sources), "search", text, "-k", "2", "--json"]) == 0
        hits = json.loads(capsys.readouterr().out)
        assert len(hits) == 2 and hits[0]["score"] >= hits[1]["score"]
        top = hits[0]
        assert (top["url"], top["heading_path"], top["text"]) == (
            f"{site.base_url}/guide/page1",
            f"Guide Page1 > {heading}",
            text,
        )
        assert top["score"] > 0.9  # the query is the section's text; its heading is embedded too

        assert main(["--sources", str(sources), "resolve", top["key"], "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["text"] == text

        assert main(["--sources", str(sources), "status", "--json"]) == 0
        (status,) = json.loads(capsys.readouterr().out)
        assert (status["source"], status["pages_live"], status["sections_indexed"]) == ("docs", 3, 6)
        assert status["last_run"]["counts"]["embedded"] == 6
