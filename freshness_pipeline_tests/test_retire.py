"""A source taken out of the sources file: `freshness status` names it, and
`freshness retire NAME --yes` drops its namespaces, its state rows and its Dagster
partition, touching nothing of the sources the file still names; a retirement killed
between its two halves is finished by the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from sqlalchemy import create_engine, func, select

from freshness_pipeline import open_index
from freshness_pipeline.adapters.state import schema
from freshness_pipeline.cli import main
from freshness_pipeline.config import state_url
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.faults import CRASH_ENV
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.test_cli import cli


def _sources(path: Path, sites: dict[str, str], state: str | None = None) -> str:
    body = {"sources": [{"name": n, "sitemap": s} for n, s in sites.items()], "embedder": {"provider": "hashing"}}
    if state:
        body["state_url"] = state
    path.write_text(yaml.safe_dump(body))
    return str(path)


def _rows(home: Path, sources: str) -> dict[str, int]:
    """Rows per source in every table of the state store that has a `source` column."""
    engine = create_engine(state_url(open_index(home, sources).settings))
    counts: dict[str, int] = {}
    with engine.connect() as conn:
        for t in schema.metadata.sorted_tables:
            if "source" in t.c:
                for source, n in conn.execute(select(t.c.source, func.count()).group_by(t.c.source)):
                    counts[source] = counts.get(source, 0) + n
    engine.dispose()
    return counts


def _tables(home: Path) -> list[str]:
    """The LanceDB tables of the home's vector store, by their folders."""
    return sorted(p.name.removesuffix(".lance") for p in (home / "vectors").glob("*.lance"))


def _partitions() -> list[str]:
    with dg.DagsterInstance.get() as instance:
        return sorted(instance.get_dynamic_partitions("sources"))


def test_a_source_out_of_the_file_is_listed_then_retired_and_the_other_kept(
    dagster_home: Path, any_state_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with DocsSite() as kept, DocsSite() as old:
        kept.publish(generate(4, sections_per_page=2, seed=1).markdown())
        old.publish(generate(3, sections_per_page=2, seed=2).markdown())
        sites = {"docs": kept.sitemap_url, "old": old.sitemap_url}
        cli("run", "--sources", _sources(dagster_home / "both.yaml", sites, any_state_url))
    one = _sources(dagster_home / "one.yaml", {"docs": kept.sitemap_url}, any_state_url)
    rows, tables = _rows(dagster_home, one), _tables(dagster_home)
    assert rows["old"] > 0 and rows["docs"] > 0 and "old-v1" in tables and "docs-v1" in tables
    assert _partitions() == ["docs", "old"]

    text, _ = cli("status", "--sources", one)
    (old_line,) = [line for line in text.splitlines() if line.startswith("old:")]
    assert old_line.startswith("old: not in the sources file; its 6 sections are still in the vector store."), text
    assert "`freshness retire old --yes`" in old_line

    # Refused, with nothing dropped: without --yes, and for a source the file names.
    with pytest.raises(SystemExit) as exc:
        main(["retire", "old", "--sources", one])
    assert exc.value.code == 2 and "drops old's vectors and state for good: pass --yes" in capsys.readouterr().err
    _, err = cli("retire", "docs", "--yes", "--sources", one, expect=2)
    assert "docs is in the sources file" in err and "take it out of the file first" in err, err
    assert _rows(dagster_home, one) == rows and _tables(dagster_home) == tables

    out, _ = cli("retire", "old", "--yes", "--sources", one)
    assert out.splitlines() == [
        "retired old:",
        "  vector store: namespaces old-v1, old-v2 dropped (the index held 6 sections)",
        f"  state store: {rows['old']} rows deleted",
        "  Dagster partition: deleted (its runs stay in Dagster's history)",
    ], out
    assert "old" not in _rows(dagster_home, one) and _rows(dagster_home, one)["docs"] == rows["docs"]
    assert [t for t in _tables(dagster_home) if t.startswith("old")] == [] and "docs-v1" in _tables(dagster_home)
    assert _partitions() == ["docs"]
    text, _ = cli("status", "--sources", one)
    assert "old" not in text and text.startswith("docs: 4 pages, 8 sections indexed"), text
    (hit, *_) = json.loads(cli("search", "--json", "topic", "--sources", one)[0])
    assert hit["source"] == "docs"

    _, err = cli("retire", "old", "--yes", "--sources", one, expect=2)
    assert "nothing of old is left to retire" in err and "does not name: none" in err, err


def test_a_retirement_killed_after_its_drops_is_finished_by_the_next(dagster_home: Path) -> None:
    with DocsSite() as kept, DocsSite() as old:
        kept.publish(generate(2, sections_per_page=2, seed=3).markdown())
        old.publish(generate(2, sections_per_page=2, seed=4).markdown())
        both = _sources(dagster_home / "both.yaml", {"docs": kept.sitemap_url, "old": old.sitemap_url})
        cli("run", "--sources", both)
    one = _sources(dagster_home / "one.yaml", {"docs": kept.sitemap_url})
    env = {**os.environ, CRASH_ENV: "retire_dropped"}
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", "retire", "old", "--yes", "--sources", one]
    killed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    # The namespaces are gone, the rows and the partition are not: status still names it.
    assert [t for t in _tables(dagster_home) if t.startswith("old")] == []
    assert _rows(dagster_home, one)["old"] > 0 and _partitions() == ["docs", "old"]
    assert "old: not in the sources file" in cli("status", "--sources", one)[0]

    out, _ = cli("retire", "old", "--yes", "--sources", one)
    assert "  vector store: namespaces old-v1, old-v2 dropped (the index held 4 sections)" in out.splitlines(), out
    assert "old" not in _rows(dagster_home, one) and _partitions() == ["docs"]
