"""The checks of a failed refresh run on the Postgres instance, as the UI shows them (the
webserver's GraphQL API): a step that fails reports each check it had not evaluated as
failed with the step's error, and the check of a step that never started is what Dagster
resolves a planned check of a failed run to, "Execution failed". None stays planned, and
`source_fresh` is not planned in a refresh run at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.dagster_services import webserver
from freshness_pipeline_tests.deploy.conftest import REFRESH_CHECKS, check_statuses, deployment_env, write_sources
from freshness_pipeline_tests.sitegen import generate

pytestmark = pytest.mark.postgres


def test_a_failed_runs_checks_end_with_the_steps_error(tmp_path: Path, databases: tuple[str, str]) -> None:
    dagster_db, state_db = databases
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # the vector store's path is a file: vector_index fails, nothing before it
    with DocsSite() as site:
        site.publish(generate(3, sections_per_page=2, seed=81).markdown())
        sources = write_sources(tmp_path / "sources.yaml", {"docs": site.sitemap_url}, blocker / "vectors")
        env = deployment_env(tmp_path, dagster_db, state_db, {}, sources)
        env.pop("FRESHNESS_EXECUTOR")  # `freshness run` executes the run here, on the Postgres instance
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--source", "docs", "--json"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    outcome = json.loads(out.stdout.splitlines()[-1])
    assert outcome["status"] == "failure" and outcome["message"].startswith("vector_index: "), outcome
    with webserver(env, tmp_path / "webserver.log") as url:
        statuses = check_statuses(url, outcome["run_id"])
        # `source_fresh` is judged between runs (source_freshness_sensor), never planned in one.
        assert check_statuses(url, outcome["run_id"], {"vector_index": ("source_fresh",)}) == {}
    assert set(statuses) == {n for names in REFRESH_CHECKS.values() for n in names}, statuses
    status, description = statuses.pop("reconcile_clean")
    assert status == "FAILED" and description is not None, (status, description)
    assert description.startswith("not evaluated: vector_index failed before it: "), description
    assert statuses.pop("freshness_alert") == ("EXECUTION_FAILED", None)  # its step never started
    assert all(s in ("SUCCEEDED", "FAILED") for s, _ in statuses.values()), statuses
