"""Damaged state, made for real on a real home: a truncated freshness.db, a read-only home,
a deleted LanceDB data file, a deleted vector store. Each command says in one line what is
damaged and the way out (no traceback); reads need no write access; `status` agrees with
reconcile; `freshness reconcile --fix` rebuilds the vector table from the manifest and the
embedding cache."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import Site, generate

REPO = Path(__file__).resolve().parents[2]
REPAIR = "`freshness reconcile --fix` rebuilds it from the manifest and the embedding cache"
# Root ignores file modes; without these capabilities it obeys them like any user.
NO_OVERRIDE = "-dac_override,-dac_read_search,-fowner"


@pytest.fixture
def built(dagster_home: Path) -> Iterator[tuple[Freshness, Site, DocsSite]]:
    docs = generate(6, sections_per_page=3, seed=9)  # 18 sections
    with DocsSite() as site:
        site.publish(docs.markdown())
        app = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        assert app.run()["embedded"] == 18
        yield app, docs, site


def texts(records: list[dict]) -> set[tuple[str, str, str]]:
    return {(r["url"], r["heading_path"], r["text"]) for r in records}


def one_line_error(app: Freshness, *args: str, expect: int = 2, capsys: pytest.CaptureFixture[str]) -> str:
    app.cli(*args, expect=expect)
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def table_dir(home: Path) -> Path:
    (found,) = (home / "vectors").glob("docs-v1*.lance")
    return found


def test_a_truncated_state_database(built: tuple, dagster_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app, docs, site = built
    db = dagster_home / "freshness.db"
    os.truncate(db, db.stat().st_size // 2)
    capsys.readouterr()
    for args in (("status",), ("search", "cache"), ("dump",), ("reconcile",), ("resolve", "k")):
        err = one_line_error(app, *args, capsys=capsys)
        assert f"{db} is damaged (database disk image is malformed)" in err
        assert f"mv {db} {db}.damaged" in err and "`freshness run` rebuilds it" in err
    # The way out, as the message says.
    db.rename(db.with_name("freshness.db.damaged"))
    assert app.run()["status"] == "success"
    assert json.loads(app.cli("reconcile", "--json"))["clean"]  # same ids: the old records were rewritten
    assert texts(app.dump()) == docs.expected(site.base_url)


# Runs each command through `main` in one process, its output and exit status apart: one
# interpreter start for the six reads instead of six (~2 s of CPU each).
READS = """
import contextlib, io, json, sys
from freshness_pipeline.cli import main
done = []
for args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
    done.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print(json.dumps(done))
"""


@dataclass(frozen=True)
class Read:
    returncode: int
    stdout: str
    stderr: str


def readers(app: Freshness, home: Path, *commands: tuple[str, ...]) -> list[Read]:
    """Commands run by someone who cannot write the home (root without its overrides), one
    after the other in one process."""
    argv = [["--sources", str(app.sources), *args] for args in commands]
    cmd = [sys.executable, "-c", READS, json.dumps(argv)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.fail("running as root needs util-linux `setpriv` to drop the permission overrides")
        cmd = [setpriv, f"--inh-caps={NO_OVERRIDE}", f"--bounding-set={NO_OVERRIDE}", *cmd]
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [Read(r["code"], r["stdout"], r["stderr"]) for r in json.loads(done.stdout.splitlines()[-1])]


def test_a_run_on_a_home_it_cannot_write_says_so_in_one_line(built: tuple, dagster_home: Path) -> None:
    app, docs, site = built
    before = texts(app.dump())
    chmod_tree(dagster_home, writable=False)
    try:
        (run,) = readers(app, dagster_home, ("run",))
    finally:
        chmod_tree(dagster_home, writable=True)
    assert run.returncode == 2, (run.stdout, run.stderr[-3000:])
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run.stderr[-3000:]
    assert f"{dagster_home}: cannot write the state (" in run.stderr and "Traceback" not in run.stderr
    assert texts(app.dump()) == before == docs.expected(site.base_url)


def chmod_tree(root: Path, *, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755 if writable else 0o555)
        else:
            path.chmod(0o644 if writable else 0o444)


def test_reads_need_no_write_access(built: tuple, dagster_home: Path) -> None:
    app, docs, site = built
    expected = docs.expected(site.base_url)
    key = app.dump()[0]["key"]
    chmod_tree(dagster_home, writable=False)
    try:
        probe, search, status, dump, weak, resolve = readers(
            app,
            dagster_home,
            ("reconcile",),  # takes the lock: a write
            ("search", "cache", "-k", "3", "--json"),
            ("status", "--json"),
            ("dump",),
            ("weak", "--json"),
            ("resolve", key, "--json"),
        )
    finally:
        chmod_tree(dagster_home, writable=True)
    assert probe.returncode == 2, "the home is still writable for the reader: the test proves nothing"
    assert probe.stderr.startswith("error: ") and ": cannot write the state (" in probe.stderr
    assert "Traceback" not in probe.stderr, probe.stderr
    assert search.returncode == 0, search.stderr
    assert len(json.loads(search.stdout)) == 3
    assert "search not recorded" in search.stderr  # said, not failed
    assert status.returncode == 0, status.stderr
    (row,) = json.loads(status.stdout)
    assert row["sections_indexed"] == 18 and row["index"]["clean"]
    assert dump.returncode == 0, dump.stderr
    assert texts([json.loads(line) for line in dump.stdout.splitlines()]) == expected
    for done in (weak, resolve):
        assert done.returncode == 0, done.stderr


def test_a_deleted_lance_data_file(built: tuple, dagster_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app, docs, site = built
    (data,) = list((table_dir(dagster_home) / "data").glob("*.lance"))[:1]
    data.unlink()
    capsys.readouterr()
    for args in (("search", "cache"), ("dump",)):
        err = one_line_error(app, *args, capsys=capsys)
        assert f"is damaged (a data file is missing: {data})" in err and REPAIR in err
    status = app.status()
    assert not status["index"]["clean"] and f"a data file is missing: {data}" in status["index"]["damage"]
    assert status["freshness"]["alert"] is True  # no score of 1.000 on a broken index
    assert "INDEX NOT HEALTHY" in app.cli("status")
    assert not json.loads(app.cli("reconcile", "--json", expect=1))["clean"]
    fixed = json.loads(app.cli("reconcile", "--fix", "--json"))
    assert fixed["fixed"] == 18
    assert json.loads(app.cli("reconcile", "--json"))["clean"] and app.status()["index"]["clean"]
    assert texts(app.dump()) == docs.expected(site.base_url)
    assert app.run()["embedded"] == 0  # nothing paid twice: the cache had every vector


def test_a_deleted_vector_store(built: tuple, dagster_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app, docs, site = built
    shutil.rmtree(dagster_home / "vectors")
    status = app.status()
    assert status["sections_indexed"] == 18  # the manifest still says so ...
    index = status["index"]  # ... and status says the store does not hold it
    assert not index["clean"] and index["missing"] == 18
    assert "18 of 18 records missing (the vector store lost them all)" in index["summary"]
    assert REPAIR in index["summary"]
    assert status["freshness"]["alert"] is True
    run = app.cli("run", "--json")  # a quiet run: its reconcile check says the same, with the way out
    (check,) = [c for c in json.loads(run.strip().splitlines()[-1])["checks"] if c["name"] == "reconcile_clean"]
    assert "18 of 18 records missing (the vector store lost them all)" in check["description"]
    capsys.readouterr()
    err = one_line_error(app, "search", "cache", capsys=capsys)
    assert "docs-v1 holds no records but the manifest lists 18" in err and REPAIR in err
    assert json.loads(app.cli("reconcile", "--fix", "--json"))["fixed"] == 18
    assert app.status()["index"]["clean"]
    assert texts(app.dump()) == docs.expected(site.base_url)
    assert len(json.loads(app.cli("search", "cache", "--json"))) == 5


def test_a_read_only_open_changes_nothing_and_takes_any_path(tmp_path: Path) -> None:
    folder = tmp_path / "odd name #1?"
    folder.mkdir()
    url = f"sqlite:///{folder / 'freshness.db'}"
    migrate(url)  # made by a refresh's first stage
    before = sorted(p.name for p in folder.iterdir())
    reader = StateStore(url, read_only=True)
    try:
        assert reader.read_only and reader.sources.get("docs") is None and reader.manifest.count("docs") == 0
    finally:
        reader.close()
    assert sorted(p.name for p in folder.iterdir()) == before  # no -wal, no journal switch
    fresh = StateStore(f"sqlite:///{tmp_path / 'new' / 'freshness.db'}", read_only=True)
    assert fresh.sources.names() == []  # nothing to read yet: an empty state, and nothing made
    fresh.close()
    assert not (tmp_path / "new").exists()


def test_readers_on_an_older_schema_name_freshness_migrate(
    built: tuple, dagster_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app, _, _ = built
    db = dagster_home / "freshness.db"
    with sqlite3.connect(db) as conn:  # as if this code were a release newer than the database
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
    capsys.readouterr()
    for args in (("status",), ("search", "cache"), ("dump",), ("reconcile",)):
        err = one_line_error(app, *args, capsys=capsys)
        assert f"{db} is at schema 0002, this code needs" in err and "run `freshness migrate`" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0002",)]  # left as it was
