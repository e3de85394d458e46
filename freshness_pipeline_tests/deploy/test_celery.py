"""The multi-worker deployment of docs/deploy.md, for real on loopback: the Dagster instance
(the shipped dagster.postgres.yaml) and the state store on Postgres, Redis as the Celery
broker and result backend, asset outputs in a folder every worker reads, two
`dagster-celery worker` processes (`general` on the `dagster` queue, `embed` on the
`embeddings` queue). Three sources refreshed at once by three `freshness run` processes with
`FRESHNESS_EXECUTOR=celery` build the same index as the in-process path, and the run events
show which worker executed each step: vector_index on `embed`, everything else on `general`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest
import redis
import yaml
from sqlalchemy import create_engine, make_url, text

from freshness_pipeline.cli import main as cli_main
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.conftest import PG_ADMIN_URL
from freshness_pipeline_tests.sitegen import generate

pytestmark = pytest.mark.postgres
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SOURCES = ("alpha", "beta", "gamma")
REDIS_DB = 7  # a database of its own on the local Redis


@pytest.fixture
def broker() -> str:
    url = f"redis://127.0.0.1:6379/{REDIS_DB}"
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis at 127.0.0.1:6379 is not reachable ({exc}); `.ci/run` starts it")
    return url


@pytest.fixture
def databases() -> Iterator[tuple[str, str]]:
    """Two new databases: the Dagster instance's and the state store's (both have `runs`)."""
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    names = [f"freshness_celery_{kind}_{uuid.uuid4().hex[:8]}" for kind in ("dagster", "state")]
    with admin.connect() as conn:
        for name in names:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    yield f"{base}/{names[0]}", f"{base}/{names[1]}"
    with admin.connect() as conn:
        for name in names:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def write_sources(path: Path, sitemaps: dict[str, str], vectors: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": n, "sitemap": url} for n, url in sitemaps.items()],
                "embedder": {"provider": "hashing"},
                "vector_store": {"provider": "lancedb", "path": str(vectors)},
            }
        )
    )
    return path


def deployment_env(tmp: Path, dagster_db: str, state_db: str, broker: str, sources: Path) -> dict[str, str]:
    db = make_url(dagster_db)
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.postgres.yaml", home / "dagster.yaml")
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # dagster-celery runs `celery`
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_USERNAME": db.username or "postgres",
        "DAGSTER_PG_PASSWORD": db.password or "",
        "DAGSTER_PG_HOST": db.host or "127.0.0.1",
        "DAGSTER_PG_PORT": str(db.port or 5432),
        "DAGSTER_PG_DB": db.database or "",
        "FRESHNESS_STATE_URL": state_db,
        "FRESHNESS_SOURCES": str(sources),
        "FRESHNESS_EXECUTOR": "celery",
        "FRESHNESS_CELERY_BROKER": broker,
        "FRESHNESS_IO_DIR": str(tmp / "shared-io"),  # every worker reads it (one machine here)
        "FRESHNESS_LAUNCH": "code-location",
    }


def start_worker(env: dict[str, str], name: str, queue: str, config: Path, log: Path) -> subprocess.Popen:
    cmd = [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(config)]
    cmd += ["-q", queue, "-n", name, "--", "--concurrency=1"]
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(log: Path, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f"{name}@" in log.read_text() and " ready." in log.read_text():
            return
        time.sleep(0.5)
    pytest.fail(f"celery worker {name} did not start:\n{log.read_text()[-3000:]}")


def records(lines: str) -> set[tuple]:
    return {(r["id"], r["url"], r["heading_path"], r["text"]) for r in map(json.loads, lines.splitlines())}


def dump(env: dict[str, str]) -> set[tuple]:
    out = subprocess.run(
        [sys.executable, "-m", "freshness_pipeline.cli", "dump"], env=env, capture_output=True, text=True, check=True
    )
    return records(out.stdout)


def local_dump(sources: Path) -> set[tuple]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["--sources", str(sources), "dump"]) == 0
    return records(out.getvalue())


def test_three_sources_refresh_at_once_through_two_celery_workers(
    tmp_path: Path, databases: tuple[str, str], broker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dagster_db, state_db = databases
    config = tmp_path / "celery.yaml"
    config.write_text(yaml.safe_dump({"execution": {"config": {"broker": broker, "backend": broker}}}))
    with ExitStack() as stack:
        sites = {n: stack.enter_context(DocsSite()) for n in SOURCES}
        for i, site in enumerate(sites.values()):
            site.publish(generate(3, sections_per_page=2, seed=60 + i).markdown())
        sitemaps = {n: s.sitemap_url for n, s in sites.items()}
        sources = write_sources(tmp_path / "sources.yaml", sitemaps, tmp_path / "vectors")
        env = deployment_env(tmp_path, dagster_db, state_db, broker, sources)

        workers = {"general": "dagster", "embed": "embeddings"}
        procs = [start_worker(env, n, q, config, tmp_path / f"{n}.log") for n, q in workers.items()]
        stack.callback(lambda: [(os.killpg(p.pid, 15), p.wait(60)) for p in procs])
        for n in workers:
            wait_ready(tmp_path / f"{n}.log", n)

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
        monkeypatch.setenv("FRESHNESS_LAUNCH", "in-process")
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


def workers_by_step(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """Step key -> the Celery worker that executed it, from the run's engine events."""
    out = {}
    for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records:
        event = r.event_log_entry.dagster_event
        worker = event.engine_event_data.metadata.get("Celery worker") if event and event.engine_event_data else None
        if worker is not None:
            out[event.step_key] = str(worker.value)
    return out
