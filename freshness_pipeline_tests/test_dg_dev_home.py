"""The README's one line for the UI on a new home, run as written (`freshness migrate && dg
dev`): the UI's instance has the project's dagster.yaml (the run queue of one run per
source), which `dg dev` alone, writing none, would not have."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from freshness_pipeline_tests.dagster_services import free_port
from freshness_pipeline_tests.processes import in_own_group, stop_group

REPO = Path(__file__).resolve().parents[1]
QUERY = "{ instance { runQueuingSupported runQueueConfig { maxConcurrentRuns } } }"


def readme_line() -> str:
    (line,) = [
        ln for ln in (REPO / "README.md").read_text().splitlines() if ln.startswith("freshness migrate && dg dev")
    ]
    return line.split("#", 1)[0].strip()


def test_the_readmes_ui_line_gives_a_new_home_the_projects_instance(tmp_path: Path) -> None:
    home, sources = tmp_path / "new_home", tmp_path / "sources.yaml"
    sources.write_text(yaml.safe_dump({"sources": [{"name": "docs", "sitemap": "http://127.0.0.1:9/sitemap.xml"}]}))
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "FRESHNESS_SOURCES": str(sources),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
    }
    port = free_port()
    command = f"{readme_line()} --port {port} --host 127.0.0.1"
    # its own process group: dg dev's webserver, daemon and code servers end with it
    proc = in_own_group(["bash", "-c", command], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, instance = time.monotonic() + 180, None
        while time.monotonic() < deadline and proc.poll() is None and instance is None:
            try:
                instance = httpx.post(f"http://127.0.0.1:{port}/graphql", json={"query": QUERY}, timeout=5).json()
            except (httpx.HTTPError, ValueError):
                time.sleep(1)
        assert instance is not None, f"{shlex.quote(command)}: " + proc.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
        assert instance["data"]["instance"] == {"runQueuingSupported": True, "runQueueConfig": {"maxConcurrentRuns": 4}}
    finally:
        stop_group(proc)
