"""The pieces of the multi-worker deployment of docs/deploy.md, on loopback: a broker of the
test's own on the local Redis (a key prefix) or RabbitMQ (a virtual host), two new Postgres
databases, the deployment's environment, and `dagster-celery worker` processes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import httpx
import pytest
import redis
import yaml
from sqlalchemy import create_engine, make_url, text

from freshness_pipeline_tests.conftest import PG_ADMIN_URL
from freshness_pipeline_tests.dagster_services import daemon, stop_sensors, webserver
from freshness_pipeline_tests.processes import in_own_group

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
REDIS_URL = "redis://127.0.0.1:6379/0"
RABBIT = ("127.0.0.1", 5672)


def _rabbitmqctl(*args: str) -> None:
    try:
        subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"`rabbitmqctl {' '.join(args)}` failed ({exc}); the test makes a virtual host of its own")


@pytest.fixture(params=["redis", "rabbitmq"])
def broker(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The broker variables of the deployment, on a broker namespace only this test uses."""
    tag = f"freshness-test-{uuid.uuid4().hex[:10]}"
    if request.param == "redis":
        client = redis.Redis.from_url(REDIS_URL)
        try:
            client.ping()
        except redis.ConnectionError as exc:
            pytest.fail(f"Redis at 127.0.0.1:6379 is not reachable ({exc}); `.ci/run` starts it")
        yield {"FRESHNESS_CELERY_BROKER": REDIS_URL, "FRESHNESS_CELERY_KEY_PREFIX": f"{tag}:"}
        for key in client.scan_iter(match=f"{tag}:*", count=1000):
            client.delete(key)
        client.close()
        return
    try:
        socket.create_connection(RABBIT, timeout=5).close()
    except OSError as exc:
        pytest.fail(f"RabbitMQ at 127.0.0.1:5672 is not reachable ({exc}); `.ci/run` starts it")
    _rabbitmqctl("add_vhost", tag)
    _rabbitmqctl("set_permissions", "-p", tag, "guest", ".*", ".*", ".*")
    # The URL docs/deploy.md gives, on the test's virtual host instead of `/`.
    yield {"FRESHNESS_CELERY_BROKER": f"pyamqp://guest:guest@127.0.0.1:5672/{tag}"}
    _rabbitmqctl("delete_vhost", tag)


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


def write_sources(
    path: Path, sitemaps: dict[str, str], vectors: Path, embedder: dict[str, object] | None = None
) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": n, "sitemap": url} for n, url in sitemaps.items()],
                "embedder": embedder or {"provider": "hashing"},
                "vector_store": {"provider": "lancedb", "path": str(vectors)},
            }
        )
    )
    return path


def deployment_env(tmp: Path, dagster_db: str, state_db: str, broker: dict[str, str], sources: Path) -> dict[str, str]:
    db = make_url(dagster_db)
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.postgres.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRESHNESS_CELERY_")}
    return {
        **env,
        **broker,
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
        "FRESHNESS_IO_DIR": str(tmp / "shared-io"),  # every worker reads it (one machine here)
    }


def start_deployment(stack: ExitStack, env: dict[str, str], tmp: Path) -> None:
    """The deployment's webserver (its sensors stopped: the test's runs are the only ones)
    and daemon, after docs/deploy.md's step that sets the `embeddings` pool's limit;
    `freshness run` submits to the webserver (`FRESHNESS_DAGSTER_URL`)."""
    subprocess.run([BIN / "dagster", "instance", "concurrency", "set", "embeddings", "1"], env=env, check=True)
    url = stack.enter_context(webserver(env, tmp / "webserver.log"))
    stop_sensors(url)
    stack.enter_context(daemon(env, tmp / "daemon.log"))
    env["FRESHNESS_DAGSTER_URL"] = url


def start_worker(env: dict[str, str], name: str, queues: tuple[str, ...], log: Path) -> subprocess.Popen[bytes]:
    """A worker as docs/deploy.md starts it, in a process group of its own (to kill it whole)."""
    cmd = [str(BIN / "dagster-celery"), "worker", "start", "-A", "freshness_pipeline.defs.celery_app"]
    # One `-q` with a comma-separated list: celery keeps only the last of several `-Q`.
    cmd += ["-q", ",".join(queues), "-n", name, "--", "--concurrency=1"]
    return in_own_group(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def wait_ready(log: Path, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f"{name}@" in log.read_text() and " ready." in log.read_text():
            return
        time.sleep(0.5)
    pytest.fail(f"celery worker {name} did not start:\n{log.read_text()[-3000:]}")


def records(lines: str) -> set[tuple[str, str, str, str]]:
    return {(r["id"], r["url"], r["heading_path"], r["text"]) for r in map(json.loads, lines.splitlines())}


def dump(env: dict[str, str]) -> set[tuple[str, str, str, str]]:
    out = subprocess.run(
        [sys.executable, "-m", "freshness_pipeline.cli", "dump"], env=env, capture_output=True, text=True, check=True
    )
    return records(out.stdout)


def workers_by_step(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """Step key -> the Celery worker that last began executing it, from the run's engine events."""
    out = {}
    for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records:
        event = r.event_log_entry.dagster_event
        worker = event.engine_event_data.metadata.get("Celery worker") if event and event.engine_event_data else None
        if worker is not None and event is not None and event.step_key:
            out[event.step_key] = str(worker.value)
    return out


_CHECK_EXECUTIONS = """query($key: AssetKeyInput!, $name: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $name, limit: 20) {
    runId status evaluation { description severity }
  }
}"""
REFRESH_CHECKS = {  # the checks the refresh job plans, by asset
    "fetched_pages": ("flagged_pages", "pages_not_checked"),
    "diff_plan": ("stale_share", "change_spike"),
    "vector_index": ("reconcile_clean",),
    "freshness_metrics": ("freshness_alert",),
}


def check_statuses(
    url: str, run_id: str, checks: dict[str, tuple[str, ...]] = REFRESH_CHECKS
) -> dict[str, tuple[str, str | None]]:
    """Check name -> (status, description) of each of `checks` (by asset) executed in run
    `run_id`, as the webserver's GraphQL API (the UI) resolves them."""
    out = {}
    for asset, names in checks.items():
        for name in names:
            variables = {"key": {"path": [asset]}, "name": name}
            body = httpx.post(f"{url}/graphql", json={"query": _CHECK_EXECUTIONS, "variables": variables}, timeout=60)
            data = body.json()
            assert not data.get("errors"), data
            for e in data["data"]["assetCheckExecutions"]:
                if e["runId"] == run_id:
                    out[name] = (e["status"], (e["evaluation"] or {}).get("description"))
    return out
