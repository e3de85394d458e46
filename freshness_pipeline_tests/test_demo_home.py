"""`freshness demo --home DIR` deletes DIR before it starts: only a folder that is absent,
empty or marked by an earlier demo; anything else is refused, untouched, with exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from freshness_pipeline.cli import main
from freshness_pipeline.demo.run import MARKER, WORKSPACE, prepare_home, ui_command


def test_only_an_absent_empty_or_demo_made_home_is_remade(tmp_path: Path) -> None:
    absent = tmp_path / "a" / "home"
    assert prepare_home(absent) is None and (absent / MARKER).is_file()
    (absent / "freshness.db").write_text("old state")
    assert prepare_home(absent) is None  # made by a demo: remade
    assert sorted(p.name for p in absent.iterdir()) == [MARKER]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert prepare_home(empty) is None and (empty / MARKER).is_file()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert "not made by `freshness demo`" in (prepare_home(mine) or "")
    assert (mine / "notes.txt").read_text() == "keep me" and not (mine / MARKER).exists()

    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "is not a folder" in (prepare_home(a_file) or "")


def test_demo_refuses_a_foreign_home_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    assert main(["demo", "--home", str(tmp_path), "--embedder", "hashing"]) == 2
    assert "not made by `freshness demo`" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_the_ui_hint_is_a_complete_command(tmp_path: Path) -> None:
    home = tmp_path / "demo home"
    cmd = ui_command(home)
    bin_dir = Path(sys.executable).parent
    assert cmd == (
        f"DAGSTER_HOME='{home}' FRESHNESS_SOURCES='{home / 'sources.yaml'}' {bin_dir / 'dg'} dev -w {WORKSPACE}"
    )
    assert (bin_dir / "dg").exists() and WORKSPACE.is_file()
