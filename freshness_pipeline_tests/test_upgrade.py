"""A home made by the previous release (d9f1c34) runs on this one without a hand edit: its
dagster.yaml names a run coordinator that no longer exists, and `freshness` brings the
settings it manages up to date (`migrate` says what it changed); the state store is
migrated from that release's schema head.

The home is made by that release's own code (`git archive` of the commit, run with this
environment's packages), refreshing a loopback site, as a user of it made theirs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import pytest
import yaml

from freshness_pipeline.defs.instance import INSTANCE_CONFIG, write_instance_config
from freshness_pipeline_tests.sitefixture import Page, SiteServer

REPO = Path(__file__).resolve().parents[1]
RELEASE = "d9f1c34"


def cli(code: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(code)}
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", *args]
    return subprocess.run(cmd, env=env, cwd=code, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's code, from git; skipped in a clone without that commit."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", RELEASE], capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"release {RELEASE} is not in this clone's history: {archive.stderr.decode().strip()}")
    folder = tmp_path_factory.mktemp("release")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder


@pytest.fixture
def old_home(release: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A home refreshed once by the previous release, and its sources file."""
    pages = {
        f"/docs/{w}": Page(f"<html><title>{w}</title><main><h1>{w}</h1><p>All about {w}.</p></main></html>")
        for w in ("otter", "heron")
    }
    with SiteServer(pages) as site:
        sources = tmp_path / "sources.yaml"
        body = {"sources": [{"name": "docs", "sitemap": site.url("/sitemap.xml")}], "embedder": {"provider": "hashing"}}
        sources.write_text(yaml.safe_dump(body))
        home = tmp_path / "home"
        made = cli(release, home, "--sources", str(sources), "run")
        assert made.returncode == 0, made.stdout + made.stderr
        assert "freshness_pipeline.defs.coordinator" in (home / "dagster.yaml").read_text()
        yield home, sources


@pytest.mark.slow
def test_a_home_of_the_previous_release_runs_and_migrate_says_what_changed(old_home: tuple[Path, Path]) -> None:
    home, sources = old_home
    copy = home.with_name("copy")
    shutil.copytree(home, copy)
    migrated = cli(REPO, copy, "--sources", str(sources), "migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    lines = migrated.stdout.splitlines()
    assert (
        f"{copy / 'dagster.yaml'}: run_coordinator: module 'freshness_pipeline.defs.coordinator' -> "
        "'dagster._core.run_coordinator'"
    ) in lines
    assert any("run_monitoring: max_runtime_seconds set to 3600" in line for line in lines), lines
    assert "migrated from 0006" in lines[-1], lines
    assert yaml.safe_load((copy / "dagster.yaml").read_text()) == INSTANCE_CONFIG
    assert cli(REPO, copy, "--sources", str(sources), "migrate").stdout.splitlines()[0].startswith("state store")

    ran = cli(REPO, home, "--sources", str(sources), "run")  # no migrate first: `run` keeps it current
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert yaml.safe_load((home / "dagster.yaml").read_text()) == INSTANCE_CONFIG


def test_a_dagster_yaml_of_the_users_own_is_left_as_it_is_and_the_difference_said(tmp_path: Path) -> None:
    own = {**INSTANCE_CONFIG, "run_monitoring": {"enabled": False}, "storage": {"sqlite": {"base_dir": "x"}}}
    (tmp_path / "dagster.yaml").write_text("# mine\n" + yaml.safe_dump(own))
    said = write_instance_config(tmp_path)
    assert said and all("is not one `freshness` wrote" in line for line in said), said
    assert any("run_monitoring: enabled False -> True" in line for line in said), said
    assert yaml.safe_load((tmp_path / "dagster.yaml").read_text()) == own
