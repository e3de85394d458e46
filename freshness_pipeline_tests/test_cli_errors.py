"""Errors a user can cause with a path or a file are one `error:` line naming the thing,
exit 2 and no traceback, through the command line as a user runs it: `dump -o` into a
folder that does not exist or onto a folder, and a zero-byte state database (damaged, not
an empty index)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    body = {
        "sources": [{"name": "docs", "sitemap": "http://127.0.0.1:9/sitemap.xml"}],
        "embedder": {"provider": "hashing"},
    }
    (tmp_path / "sources.yaml").write_text(yaml.safe_dump(body))
    return home


def freshness(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(home.parent / "sources.yaml")}
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def one_error(out: subprocess.CompletedProcess[str], *named: str) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: ") and "Traceback" not in out.stderr
    assert all(n in line for n in named), line
    return line


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_dump_into_a_folder_that_does_not_exist(home: Path, fmt: str) -> None:
    target = home.parent / "nonexistent" / "dir" / "x.out"
    table = ["--table", "manifest"] if fmt != "jsonl" else []  # the records are JSON lines only
    line = one_error(freshness(home, "dump", *table, "--format", fmt, "-o", str(target)), str(target))
    assert "No such file or directory" in line


def test_dump_onto_a_folder(home: Path) -> None:
    line = one_error(freshness(home, "dump", "--table", "manifest", "--format", "parquet", "-o", str(home)), str(home))
    assert "Is a directory" in line


@pytest.mark.parametrize("command", [["status"], ["dump"], ["search", "timeout"], ["migrate"]])
def test_a_zero_byte_state_database_reads_as_damaged(home: Path, command: list[str]) -> None:
    (home / "freshness.db").touch()
    out = freshness(home, *command)
    one_error(out, str(home / "freshness.db"), "empty (0 bytes)")
    assert "0 pages" not in out.stdout
    assert (home / "freshness.db").stat().st_size == 0  # nothing wrote over it
