"""The public API's DataFrames (`open_index(...).frames`) and `freshness dump --format`,
against a loopback site refreshed twice (the demo site at v1, then v2) with a golden set
(one query it answers, one it cannot), a weak search, and sections split into chunks: each
frame's columns and dtypes are its declared table's, its rows those that `freshness dump`,
`status --json` and `weak --json` give; the README's notebook example runs on it."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.csv
import pyarrow.parquet
import pytest
import yaml

from freshness_pipeline import open_index
from freshness_pipeline.cli import main
from freshness_pipeline.core.run_counts import KEYS
from freshness_pipeline.core.tables import (
    GOLDEN,
    GOLDEN_MISSES,
    HISTORY,
    MANIFEST,
    PAGES_FOR_REVIEW,
    RUNS,
    VERDICTS,
    WEAK,
    Table,
)
from freshness_pipeline.defs.instance import write_instance_config
from freshness_pipeline.demo.run import SITE
from freshness_pipeline.demo.server import DocsSite, load_folder
from freshness_pipeline.frames import Frames

SHM = Path("/dev/shm")
README = Path(__file__).resolve().parent.parent / "README.md"
DTYPES = {
    "string": "string",
    "int": "Int64",
    "float": "Float64",
    "bool": "boolean",
    "timestamp": "datetime64[us, UTC]",
    "date": "date32[day][pyarrow]",
}
GOLDEN_SET = [
    {"query": "two-factor authentication", "expect": "/security/"},
    {"query": "how do I share a folder with a colleague?", "expect": "/no-such-page/"},
]
WEAK_QUERY = "where is the retry limit?"


@dataclass(frozen=True)
class Refreshed:
    folder: Path  # holds dagster_home/ and sources.yaml, as the README's example expects
    sources: Path
    frames: Frames
    status: dict[str, Any]  # `freshness status --json`, its one source


def cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args]) == 0, args
    return out.getvalue()


@pytest.fixture(scope="module")
def refreshed() -> Iterator[Refreshed]:
    with tempfile.TemporaryDirectory(prefix="freshness-frames-", dir=SHM if os.access(SHM, os.W_OK) else None) as d:
        yield from _refreshed(Path(d))


def _refreshed(folder: Path) -> Iterator[Refreshed]:
    """As `conftest.dagster_home`, on tmpfs when there is one (Dagster's SQLite fsyncs)."""
    home = folder / "dagster_home"
    home.mkdir()
    write_instance_config(home)
    sources = folder / "sources.yaml"
    (folder / "golden.yaml").write_text(yaml.safe_dump(GOLDEN_SET))
    with pytest.MonkeyPatch.context() as env, DocsSite() as site:
        env.setenv("DAGSTER_HOME", str(home))
        env.setenv("FRESHNESS_LAUNCH", "in-process")
        source = {
            "name": "docs",
            "sitemap": site.sitemap_url,
            "golden_set": "golden.yaml",
            "chunking": {"token_budget": 24},  # some sections in several chunks
            "checks": {"golden_miss_runs": 2},  # the missed query is a chunking problem after two runs
        }
        # Every search is weak under a threshold above any cosine similarity.
        body = {"sources": [source], "embedder": {"provider": "hashing"}, "weak_thresholds": {"hashing-v1-256": 1.5}}
        sources.write_text(yaml.safe_dump(body))
        for version in ("v1", "v2"):
            site.publish(load_folder(SITE / version))
            cli("run", "--sources", str(sources))
        cli("search", WEAK_QUERY, "--sources", str(sources))
        (status,) = json.loads(cli("status", "--json", "--sources", str(sources)))
        yield Refreshed(folder, sources, open_index(home, sources).frames, status)


def assert_typed(frame: pd.DataFrame, table: Table) -> None:
    """The frame has the table's columns, in order, each of its kind's pandas dtype."""
    assert list(frame.columns) == table.names
    assert {c: str(frame[c].dtype) for c in frame.columns} == {n: DTYPES[k] for n, k in table.columns}


def utc(seconds: float) -> pd.Timestamp:
    return pd.Timestamp(round(seconds * 1_000_000), unit="us", tz="UTC")


def test_the_manifest_frame_has_one_row_per_section_of_the_dumped_records(refreshed: Refreshed) -> None:
    frame = refreshed.frames.manifest()
    assert_typed(frame, MANIFEST.per_source())
    records = [json.loads(line) for line in cli("dump", "--sources", str(refreshed.sources)).splitlines()]
    chunks = Counter(r["key"] for r in records)
    assert max(chunks.values()) > 1  # some sections span chunks: the frame folds them
    assert len(frame) == len(chunks) and frame["key"].is_unique
    assert dict(zip(frame["key"], frame["chunks"], strict=True)) == chunks
    assert frame["chunks"].sum() == refreshed.status["sections_indexed"] == len(records)
    by_key = {r["key"]: r for r in records if chunks[r["key"]] == 1}
    for row in frame[frame["chunks"] == 1].itertuples():
        record = by_key[row.key]
        assert (row.url, row.heading_path, row.content_hash) == (
            record["url"],
            record["heading_path"],
            record["content_hash"],
        )
        assert row.as_of == datetime.date.fromisoformat(record["as_of"] + ("-01" if len(record["as_of"]) == 7 else ""))
    assert set(frame["source"]) == {"docs"} and frame.notna().all().all()


def test_dump_writes_the_manifest_frame_in_every_format(refreshed: Refreshed, tmp_path: Path) -> None:
    """`--table` says what, `--format` how: the same rows in JSON lines, Parquet and CSV, and
    a line on standard error saying what was written."""
    frame = refreshed.frames.manifest()
    parquet, csv, jsonl = tmp_path / "manifest.parquet", tmp_path / "manifest.csv", tmp_path / "manifest.jsonl"
    src = ("--sources", str(refreshed.sources))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        cli("dump", "--table", "manifest", "--format", "parquet", "--output", str(parquet), *src)
    assert err.getvalue() == f"wrote {len(frame)} rows of manifest to {parquet} (parquet)\n"
    cli("dump", "--table", "manifest", "--format", "csv", "-o", str(csv), "--source", "docs", *src)
    cli("dump", "--table", "manifest", "-o", str(jsonl), *src)
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["key"] for r in rows] == list(frame["key"]) and rows[0]["as_of"] == str(frame.loc[0, "as_of"])
    # The vector records are JSON lines only: a format they cannot take is refused.
    with pytest.raises(SystemExit) as refused, contextlib.redirect_stderr(err):
        main(["dump", "--format", "parquet", "-o", str(tmp_path / "x"), *src])
    assert refused.value.code == 2 and "JSON lines only" in err.getvalue() and not (tmp_path / "x").exists()
    from freshness_pipeline.frames import to_frame

    pd.testing.assert_frame_equal(to_frame(pyarrow.parquet.read_table(parquet)), frame)
    read = pyarrow.csv.read_csv(csv)
    assert read.column_names == list(frame.columns) and read.num_rows == len(frame)
    assert read.column("indexed_at").to_pylist() == list(frame["indexed_at"])  # UTC timestamps, not text


def test_the_history_frame_is_the_status_history_with_utc_timestamps(refreshed: Refreshed) -> None:
    frame = refreshed.frames.history()
    assert_typed(frame, HISTORY.per_source())
    shown = refreshed.status["freshness_history"]
    assert len(frame) == len(shown) == 2
    assert list(frame["measured_at"]) == [utc(h["measured_at"]) for h in shown]
    assert list(frame["score"]) == [round(h["score"], 4) for h in shown]
    assert list(frame["age_median_h"]) == [round(h["age_median_s"] / 3600, 2) for h in shown]
    assert list(frame["error_share"]) == [h["details"]["error_share"] for h in shown]
    assert len(refreshed.frames.history(limit=1)) == 1


def test_frames_join_on_run_id_source_and_url(refreshed: Refreshed) -> None:
    """Each measurement joins its run; pages join across frames on `url`."""
    joined = refreshed.frames.history().merge(refreshed.frames.runs(), on=["source", "run_id"])
    assert len(joined) == 2 and list(joined["run_id"]) == list(refreshed.frames.runs()["run_id"])[::-1]
    assert "url" in refreshed.frames.review().columns and "url" in refreshed.frames.manifest().columns


def test_the_golden_frame_runs_the_golden_set_as_the_last_refresh_did(refreshed: Refreshed) -> None:
    frame = refreshed.frames.golden()
    assert_typed(frame, GOLDEN.per_source())
    details = refreshed.status["freshness"]["details"]
    assert len(frame) == details["golden_queries"] == len(GOLDEN_SET)
    missed = frame[frame["rank"].isna() | (frame["rank"] > 5)]
    assert list(missed["query"]) == details["golden_misses"] == [GOLDEN_SET[1]["query"]]
    assert list(frame.loc[frame["stale"], "query"]) == details["stale_queries"]
    assert frame.loc[0, "rank"] == 1 and frame.loc[0, "top"].endswith("/security")


def test_the_miss_counter_frame_holds_the_chunking_problems_of_status(refreshed: Refreshed) -> None:
    frame = refreshed.frames.golden_misses()
    assert_typed(frame, GOLDEN_MISSES.per_source())
    assert len(frame) == 4  # each query, and each expected section
    chronic = frame[frame["consecutive"] >= 2].drop(columns="source")
    assert chronic.to_dict("records") == refreshed.status["chunking_problems"] != []
    assert set(frame["runs"]) == {2}


def test_the_weak_frame_is_weak_json(refreshed: Refreshed) -> None:
    frame = refreshed.frames.weak()
    assert_typed(frame, WEAK)
    shown = json.loads(cli("weak", "--json", "--sources", str(refreshed.sources)))
    assert len(frame) == len(shown) == 1
    assert list(frame["query"]) == [WEAK_QUERY] and list(frame["best_score"]) == [shown[0]["best_score"]]
    assert list(frame["source"]) == ["docs"]  # joins the other frames on `source`
    assert list(frame["created_at"]) == [utc(shown[0]["created_at"])]


def test_the_runs_frame_has_each_committed_run_newest_first(refreshed: Refreshed) -> None:
    frame = refreshed.frames.runs()
    assert_typed(frame, RUNS.per_source())
    last = refreshed.status["last_run"]
    assert len(frame) == 2 and frame.loc[0, "run_id"] == last["run_id"]
    assert {k: frame.loc[0, k] for k in KEYS} == {k: last["counts"][k] for k in KEYS}
    assert frame.loc[0, "started_at"] == utc(last["started_at"]) > frame.loc[1, "started_at"]
    assert (frame.loc[1, "new"], frame.loc[0, "gone"]) == (5, 1)  # v1's five pages; v2 dropped one
    assert list(frame["status"]) == ["success", "success"] and list(frame["tier"]) == ["all", "all"]
    assert len(refreshed.frames.runs(limit=1)) == 1


def test_the_runs_frame_has_a_run_that_did_not_commit_with_its_status_and_tier(dagster_home: Path) -> None:
    sources = dagster_home / "sources.yaml"
    sources.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "docs", "sitemap": "http://127.0.0.1:9/sitemap.xml"}],
                "embedder": {"provider": "hashing"},
            }
        )
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", "--tier", "hot", "--json", "--sources", str(sources)]) == 1
    (failed,) = [json.loads(line) for line in out.getvalue().splitlines()]
    frame = open_index(dagster_home, sources).frames.runs()
    assert_typed(frame, RUNS.per_source())
    (row,) = frame.to_dict("records")
    assert (row["run_id"], row["status"], row["tier"]) == (failed["run_id"], "failure", "hot")
    assert pd.isna(row["new"]) and row["started_at"] < row["finished_at"]


def test_the_review_frame_lists_the_flagged_pages_of_status(refreshed: Refreshed) -> None:
    frame = refreshed.frames.review()
    assert_typed(frame, PAGES_FOR_REVIEW.per_source())
    assert frame[["url", "why"]].values.tolist() == refreshed.status["flagged"] == []


def test_the_verdicts_frame_is_the_verdict_of_status(refreshed: Refreshed) -> None:
    frame = refreshed.frames.verdicts()
    assert_typed(frame, VERDICTS.per_source())
    (row,) = frame.to_dict("records")
    shown = refreshed.status["verdict"]
    assert (
        (row["source"], row["state"], row["level"])
        == ("docs", shown["state"], shown["level"])
        == (
            "docs",
            "fresh",
            "ok",
        )
    )


def test_an_unknown_table_is_named_with_the_known_ones(refreshed: Refreshed) -> None:
    with pytest.raises(ValueError, match="no table 'pages': one of manifest, history, golden"):
        open_index(refreshed.folder / "dagster_home", refreshed.sources).table("pages")


def test_the_readme_notebook_example_runs(refreshed: Refreshed, monkeypatch: pytest.MonkeyPatch) -> None:
    section = README.read_text().partition("## Reading the index from a notebook")[2].partition("\n## ")[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(refreshed.folder)
    for name in ("DAGSTER_HOME", "FRESHNESS_SOURCES"):  # the example names its home and sources file
        monkeypatch.delenv(name, raising=False)
    scope: dict[str, Any] = {}
    exec(compile(code, str(README), "exec"), scope)
    assert len(scope["manifest"]) == len(refreshed.frames.manifest())
    assert list(scope["score"]) == list(refreshed.frames.history()["score"])
    assert len(scope["measured"]) == 2  # each measurement beside its run
    assert list(scope["missed"]["query"]) == [GOLDEN_SET[1]["query"]]
