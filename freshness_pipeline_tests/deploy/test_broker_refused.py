"""A broker that refuses the connection is named in the run's failure: the run of the Celery
deployment whose broker is a closed port on loopback fails with "the Celery broker <URL> is
unreachable", not a bare ConnectionRefusedError, on both brokers (password hidden)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_pipeline_tests.defs.harness import write_sources

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("broker", "shown"),
    [
        ("redis://127.0.0.1:{port}/0", "redis://127.0.0.1:{port}/0"),
        ("pyamqp://guest:secret@127.0.0.1:{port}//", "pyamqp://guest:***@127.0.0.1:{port}//"),
    ],
    ids=["redis", "rabbitmq"],
)
def test_a_refused_broker_is_named_in_the_runs_failure(tmp_path: Path, broker: str, shown: str) -> None:
    port = _closed_port()
    sources = write_sources(tmp_path / "sources.yaml", "http://127.0.0.1:9/sitemap.xml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FRESHNESS_", "DAGSTER_"))}
    env |= {
        "PYTHONPATH": str(REPO),
        "DAGSTER_HOME": str(tmp_path),
        "FRESHNESS_SOURCES": str(sources),
        "FRESHNESS_STATE_URL": f"sqlite:///{tmp_path / 'state.db'}",
        "FRESHNESS_EXECUTOR": "celery",
        "FRESHNESS_CELERY_BROKER": broker.format(port=port),
        "FRESHNESS_IO_DIR": str(tmp_path / "io"),
    }
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    done = subprocess.run(
        [sys.executable, "-m", "freshness_pipeline_tests.deploy.broker_refused"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["status"] == "failure"
    assert summary["message"].startswith(f"the Celery broker {shown.format(port=port)} is unreachable: "), summary
    assert "secret" not in summary["message"]
