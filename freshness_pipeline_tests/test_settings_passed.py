"""Settings are passed, not set: two `Index` objects on two homes in one process each see
their own state (index, runs, status) while $DAGSTER_HOME names a third folder, and no
module below the CLI writes the process environment."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline import open_index
from freshness_pipeline_tests.sitefixture import Page, SiteServer

PACKAGE = Path(__file__).resolve().parents[1] / "freshness_pipeline"
BELOW_THE_CLI = [PACKAGE / "api.py", PACKAGE / "core", PACKAGE / "pipeline", PACKAGE / "defs"]


def page(word: str) -> Page:
    return Page(
        f"<html><title>{word}</title><main><h1>{word}</h1><p>All about {word} and more {word}.</p></main></html>"
    )


def sources_file(folder: Path, name: str, site: SiteServer) -> Path:
    folder.mkdir()
    path = folder / "sources.yaml"
    body = {"sources": [{"name": name, "sitemap": site.url("/sitemap.xml")}], "embedder": {"provider": "hashing"}}
    path.write_text(yaml.safe_dump(body))
    return path


def test_two_indexes_in_one_process_each_see_their_own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(decoy))
    monkeypatch.delenv("FRESHNESS_SOURCES", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./sources.yaml either
    before = dict(os.environ)
    with (
        SiteServer({"/docs/otter": page("otter")}) as one,
        SiteServer({"/docs/heron": page("heron"), "/docs/ibis": page("ibis")}) as two,
    ):
        a = open_index(tmp_path / "home_a", sources_file(tmp_path / "a", "alpha", one), create=True)
        b = open_index(tmp_path / "home_b", sources_file(tmp_path / "b", "beta", two), create=True)
        refreshing = a.refresh_all()
        assert next(refreshing)[1]["status"] == "success"
        assert dict(os.environ) == before  # nothing of A's is left set while its refresh is paused
        assert (a.indexed(), b.indexed()) == (["alpha"], [])
        assert b.refresh("beta")["status"] == "success"
        assert list(refreshing) == []
    assert dict(os.environ) == before
    assert [h.url for h in a.search("otter", k=5)] == [one.url("/docs/otter")]
    assert {h.url for h in b.search("heron", k=5)} == {two.url("/docs/heron"), two.url("/docs/ibis")}
    ((status_a,), (status_b,)) = a.status(), b.status()
    assert (status_a["source"], status_a["pages_live"]) == ("alpha", 1)
    assert (status_b["source"], status_b["pages_live"]) == ("beta", 2)
    for home, source in ((a.home, "alpha"), (b.home, "beta")):
        runs = dg.DagsterInstance.local_temp(str(home)).get_runs()
        assert [r.tags.get("dagster/partition") for r in runs] == [source]
    assert list(decoy.iterdir()) == []


def _writes_environment(tree: ast.AST) -> list[int]:
    """Lines that assign to, delete from or call a mutating method of `os.environ`, or call
    `os.putenv`/`os.unsetenv`."""

    def environ(node: ast.AST) -> bool:
        return ast.unparse(node) in ("os.environ", "environ")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            if any(isinstance(t, ast.Subscript) and environ(t.value) for t in targets):
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            mutating = ("setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__")
            if (environ(node.func.value) and node.func.attr in mutating) or ast.unparse(node.func) in (
                "os.putenv",
                "os.unsetenv",
            ):
                found.append(node.lineno)
    return found


def test_no_module_below_the_cli_writes_the_environment() -> None:
    files = [f for root in BELOW_THE_CLI for f in ([root] if root.is_file() else sorted(root.rglob("*.py")))]
    writes = {
        str(f.relative_to(PACKAGE)): lines for f in files if (lines := _writes_environment(ast.parse(f.read_text())))
    }
    assert writes == {}
    assert _writes_environment(ast.parse("import os\nos.environ['X'] = '1'\nos.environ.pop('Y', None)")) == [2, 3]
