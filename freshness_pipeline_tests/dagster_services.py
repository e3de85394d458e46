"""Dagster's own services for the tests that need a deployment: `dagster-webserver` and
`dagster-daemon` on the repo's workspace.yaml, on loopback, each in a process group of its
own (stopped whole at the end)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from freshness_pipeline_tests.processes import in_own_group

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORKSPACE = REPO / "workspace.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))}
    return in_own_group(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to its process group (its code servers too), then SIGKILL if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@contextmanager
def webserver(env: dict[str, str], log: Path, timeout: float = 300) -> Iterator[str]:
    """`dagster-webserver` serving the workspace; its URL once it answers."""
    port = free_port()
    cmd = [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), "-w", str(WORKSPACE)]
    proc = _start(cmd, env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"dagster-webserver exited: {log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{url}/server_info", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"dagster-webserver did not answer: {log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield url
    finally:
        stop(proc)


@contextmanager
def daemon(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`dagster-daemon run` on the workspace (the run queue, run monitoring, the sensors)."""
    proc = _start([str(BIN / "dagster-daemon"), "run", "-w", str(WORKSPACE)], env, log)
    try:
        yield proc
    finally:
        stop(proc)


_SENSORS = """query($selector: RepositorySelector!) {
  sensorsOrError(repositorySelector: $selector) { ... on Sensors { results { name sensorState { id status } } } }
}"""
_STOP = "mutation($id: String) { stopSensor(id: $id) { __typename } }"


def stop_sensors(url: str) -> list[str]:
    """Stop every running sensor of the location through the webserver (as the UI's toggle
    does), before a daemon starts: the test's runs are then the only ones. Their names."""
    selector = {"repositoryLocationName": "freshness_pipeline", "repositoryName": "__repository__"}

    def post(query: str, variables: dict[str, object]) -> dict:
        body = httpx.post(f"{url}/graphql", json={"query": query, "variables": variables}, timeout=60).json()
        assert not body.get("errors"), body
        return body["data"]

    stopped = []
    for sensor in post(_SENSORS, {"selector": selector})["sensorsOrError"]["results"]:
        if sensor["sensorState"]["status"] == "RUNNING":
            done = post(_STOP, {"id": sensor["sensorState"]["id"]})["stopSensor"]
            assert done["__typename"] == "StopSensorMutationResult", done
            stopped.append(sensor["name"])
    return stopped
