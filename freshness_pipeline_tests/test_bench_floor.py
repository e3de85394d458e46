"""`bench/dagster_floor.py`, the Dagster-alone row of `bench.overhead`, stays a job of the
refresh job's shape: run as the bench runs it (a fresh Python in a home with the project's
`dagster.yaml`), it writes as many events as a quiet refresh does, and it imports nothing of
this project."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.defs.instance import write_instance_config
from freshness_pipeline_tests.pipeline.test_fetch_policy import Pipeline, html_pages
from freshness_pipeline_tests.sitefixture import SiteServer
from freshness_pipeline_tests.sitegen import generate

FLOOR = Path(__file__).resolve().parents[1] / "bench" / "dagster_floor.py"
# Runs the floor as a script, then names the modules of this project it loaded.
PROBE = """
import runpy, sys
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
except SystemExit as exc:
    code = exc.code
print(sorted(m for m in sys.modules if m.startswith("freshness_pipeline")))
sys.exit(code)
"""


def test_the_floor_writes_a_quiet_refreshs_events_and_loads_nothing_of_the_project(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SiteServer(html_pages(generate(4, seed=5))) as server:
        p = Pipeline(tmp_path, capsys, server)
        p.run()
        quiet = p.run()
    assert quiet["new"] == quiet["changed"] == 0, quiet
    refresh_events = len(dg.DagsterInstance.get().all_logs(quiet["run_id"]))

    home = tmp_path / "floor-home"
    write_instance_config(home)  # as the bench makes its homes; the refresh's home has it too
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(FLOOR)],
        env={"DAGSTER_HOME": str(home), "PATH": "/usr/bin:/bin"},
        cwd=home,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report, imported = out.stdout.strip().splitlines()
    floor = json.loads(report)
    assert floor["success"] is True
    assert floor["events"] == refresh_events, (
        f"a quiet refresh writes {refresh_events} events, bench/dagster_floor.py {floor['events']}: "
        "give the floor the refresh job's steps, checks and log lines"
    )
    assert imported == "[]", f"the floor imported {imported}"
