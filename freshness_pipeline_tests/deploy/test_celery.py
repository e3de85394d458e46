"""The multi-worker deployment of docs/deploy.md, for real on loopback, on each broker the
doc gives (Redis, and RabbitMQ with its `pyamqp://` URL): the Dagster instance (the shipped
dagster.postgres.yaml) and the state store on Postgres, asset outputs in a folder every
worker reads, two `dagster-celery worker` processes (`general` on the `dagster` queue,
`embed` on the `embeddings` queue) configured, like the runs, by `FRESHNESS_CELERY_BROKER`
alone, the webserver and the daemon. Three sources refreshed at once by three `freshness run
--submit` processes (`FRESHNESS_EXECUTOR=celery`) build the same index as the in-process path, and the run events
show which worker executed each step: vector_index on `embed`, everything else on `general`.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.cli import main as cli_main
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.dagster_services import stop as stop_worker
from freshness_pipeline_tests.deploy.conftest import (
    deployment_env,
    dump,
    records,
    start_deployment,
    start_worker,
    wait_ready,
    workers_by_step,
    write_sources,
)
from freshness_pipeline_tests.sitegen import generate

pytestmark = pytest.mark.postgres
SOURCES = ("alpha", "beta", "gamma")


def local_dump(sources: Path) -> set[tuple]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["--sources", str(sources), "dump"]) == 0
    return records(out.getvalue())


def test_three_sources_refresh_at_once_through_two_celery_workers(
    tmp_path: Path, databases: tuple[str, str], broker: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dagster_db, state_db = databases
    with ExitStack() as stack:
        sites = {n: stack.enter_context(DocsSite()) for n in SOURCES}
        for i, site in enumerate(sites.values()):
            site.publish(generate(3, sections_per_page=2, seed=60 + i).markdown())
        sitemaps = {n: s.sitemap_url for n, s in sites.items()}
        sources = write_sources(tmp_path / "sources.yaml", sitemaps, tmp_path / "vectors")
        env = deployment_env(tmp_path, dagster_db, state_db, broker, sources)

        workers = {"general": "dagster", "embed": "embeddings"}
        for n, q in workers.items():  # one after the other: the first creates Dagster's tables
            stack.callback(stop_worker, start_worker(env, n, (q,), tmp_path / f"{n}.log"))
            wait_ready(tmp_path / f"{n}.log", n)
        start_deployment(stack, env, tmp_path)

        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "freshness_pipeline.cli", "run", "--source", n, "--json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in SOURCES
        ]
        outcomes = []
        for p in runs:
            stdout, stderr = p.communicate(timeout=900)
            assert p.returncode == 0, stdout + stderr[-3000:]
            outcomes.append(json.loads(stdout.splitlines()[-1]))
        assert all(o["status"] == "success" for o in outcomes), outcomes
        celery_index = dump(env)

        # The same sources through the in-process path (SQLite, the default executor), in
        # this process, without the deployment's variables (a developer may have them set).
        local_home = tmp_path / "local_home"
        local_home.mkdir()
        local_sources = write_sources(tmp_path / "local.yaml", sitemaps, tmp_path / "local-vectors")
        monkeypatch.setenv("DAGSTER_HOME", str(local_home))
        for var in ("FRESHNESS_STATE_URL", "FRESHNESS_EXECUTOR", "FRESHNESS_IO_DIR"):
            monkeypatch.delenv(var, raising=False)
        assert cli_main(["--sources", str(local_sources), "run"]) == 0
        assert celery_index == local_dump(local_sources) and len(celery_index) == 3 * 3 * 2

    for k in env:
        if k.startswith("DAGSTER_"):
            monkeypatch.setenv(k, env[k])
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        for outcome in outcomes:
            by_step = workers_by_step(instance, outcome["run_id"])
            assert by_step.pop("vector_index").startswith("embed@"), by_step
            assert by_step and all(w.startswith("general@") for w in by_step.values()), by_step
