"""A clone from a forge has no ../shared: every test that reads the corpora (wherever it lives
in the suite) skips itself with its reason and the command that runs it, and `make test`
passes. Under CI=true, or with FRESHNESS_CORPORA set, a missing corpus fails loudly."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.corpora import CORPORA

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "freshness_pipeline_tests"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's files (tracked and new, as git lists them) in a folder with no siblings."""
    root = tmp_path_factory.mktemp("forge") / "freshness_pipeline"
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        if (REPO / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
    assert not (root.parent / "shared").exists()
    return root


def _pytest(clone: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("FRESHNESS_CORPORA", "CI", "PYTEST_ADDOPTS")}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "corpus",
        *args,
        "freshness_pipeline_tests",
    ]
    return subprocess.run(
        cmd, cwd=clone, env={**base, "PYTHONPATH": str(clone), **env}, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def corpus_tests(clone: Path) -> int:
    """How many tests the suite marks `corpus` (the replay, the quiet redeploy, the incremental
    hits, the tokenizer's window): each must skip, or fail, on its own."""
    listed = _pytest(clone, "--collect-only")
    count = sum("::" in line for line in listed.stdout.splitlines())
    assert count >= len(CORPORA) + 2, listed.stdout
    return count


def test_a_bare_clone_skips_the_corpus_replay_and_says_how_to_run_it(clone: Path, corpus_tests: int) -> None:
    done = _pytest(clone)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{corpus_tests} skipped" in done.stdout and "failed" not in done.stdout, done.stdout
    reasons = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED [")]
    assert reasons, done.stdout
    for reason in reasons:
        assert f"no {', '.join(CORPORA)} corpus under {clone.parent / 'shared' / 'corpora'}" in reason, reason
        assert "run it with `FRESHNESS_CORPORA=/path/to/corpora python -m pytest -m corpus`" in reason
    assert any("test_tokenizer.py" in reason for reason in reasons), reasons


@pytest.mark.parametrize("env", [{"CI": "true"}, {"FRESHNESS_CORPORA": "/nonexistent/corpora"}], ids=["ci", "env"])
def test_under_ci_or_a_named_folder_a_missing_corpus_fails(clone: Path, corpus_tests: int, env: dict[str, str]) -> None:
    done = _pytest(clone, **env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{corpus_tests} errors" in done.stdout and "must run" in done.stdout, done.stdout


def test_only_the_corpora_fixture_finds_the_corpora() -> None:
    """A test that looked for the folder itself would bypass the rule above: no test module
    names `corpora_root` or $FRESHNESS_CORPORA but the fixture's conftest (and this file)."""
    own = {TESTS / "conftest.py", Path(__file__).resolve()}
    bypass = []
    for path in sorted(set(TESTS.rglob("*.py")) - own):
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if "corpora_root" in names or "FRESHNESS_CORPORA" in strings:
            bypass.append(str(path.relative_to(REPO)))
    assert bypass == []
