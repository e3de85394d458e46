"""`dagster job launch` and its code server, started before the calling process imports Dagster.

A launched refresh needs three processes besides the caller: the code server, which loads
the code location; the launcher, which creates the run through it; the run worker, which
the code server spawns. Left to itself, `dagster job launch` starts its own code server and
waits for it to load, so the three start one after the other. Here the code server
(`dagster api grpc` on a socket of this command's) and the launchers start at once, side by
side with the caller's own imports, both through `gated.py` (which each run worker imports
first too). Each imports what it needs (the code server, the code location too), then
waits on its stdin for the caller's go: the code server's once the caller made the
instance (two processes making a fresh home's storage at once leave it broken), the
launchers' once the partitions exist, dead runs are reaped and the code server
serves (so a new source's run never starts before its partition). A caller that stops
before its go closes their stdin and nothing is launched. The code server lives as long as
the command: stopped once its runs' workers exited, and with Dagster's heartbeat timeout as
the backstop for a command that was killed. No Dagster import in this module: that is its
point.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

LAUNCH_ENV = "FRESHNESS_LAUNCH"  # "in-process": execute_in_process, no code location origin
EXECUTOR_ENV = "FRESHNESS_EXECUTOR"  # executors.py's setting, read here without importing Dagster
LOCATION = "freshness_pipeline"
JOB = "refresh"
PARTITION_TAG = "dagster/partition"
DEFINITIONS = ("freshness_pipeline.defs.definitions", "defs")
GATED = "freshness_pipeline.defs.gated"  # the main module of the code server and the launchers
SERVER, LAUNCHER = "server", "launcher"  # its roles
STDERR_FD = 2
SERVER_READY_S = 300.0  # the code server's load, on a busy host
# Without the heartbeat of a workspace that manages it, the code server shuts down this long
# after it started, once its runs ended: a backstop for a command killed before it stopped it.
SERVER_HEARTBEAT_S = 900
GO = "go"


class LaunchError(RuntimeError):
    """`dagster job launch` did not create the run (its error is in the message)."""


def in_process_runs(flag: bool | None = None) -> bool:
    """Whether refreshes run inside this process (`flag`, else $FRESHNESS_LAUNCH)."""
    return flag if flag is not None else os.environ.get(LAUNCH_ENV) == "in-process"


def run_config(log_level: str) -> dict[str, Any]:
    """The console's level; under the default executor, every step inside the run worker
    (no process per step)."""
    config: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    if os.environ.get(EXECUTOR_ENV, "default") == "default":
        config["execution"] = {"config": {"in_process": {}}}
    return config


@dataclass(slots=True)
class CodeServer:
    """`dagster api grpc` serving the code location on a Unix socket, for this command's launches."""

    socket: Path
    proc: subprocess.Popen[bytes]
    log: IO[str]
    running: set[str] = field(default_factory=set)  # runs told to go whose worker may still run

    def wait_ready(self, timeout: float = SERVER_READY_S) -> None:
        """Tell it to go (once), then wait until it serves (it binds its socket once the code
        location loaded); a server that exits first, or never serves, is a LaunchError with
        its output."""
        _go(self.proc)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(self.socket))
                    return
                except OSError:
                    time.sleep(0.05)
        self.log.seek(0)
        tail = self.log.read()[-3000:].strip() or f"exit code {self.proc.returncode}"
        raise LaunchError(f"the code server for {LOCATION} did not start: {tail}")

    def stop(self) -> None:
        """Killed once every run it spawned ended and its worker exited (it holds nothing
        else; a graceful stop takes over a second); otherwise stopped gracefully."""
        if self.proc.poll() is None:
            if self.running:
                self.proc.terminate()
            else:
                self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass(slots=True)
class Launcher:
    """A `dagster job launch` of one run: started, waiting for its go until `go()`."""

    run_id: str
    proc: subprocess.Popen[bytes]
    log: IO[str]
    server: CodeServer

    def go(self) -> None:
        """Once the code server serves: raises LaunchError if it did not start."""
        self.server.wait_ready()
        self.server.running.add(self.run_id)
        _go(self.proc)

    def ended(self) -> None:
        """The run ended and its worker exited."""
        self.server.running.discard(self.run_id)

    def stop(self) -> None:
        """Without its go it exits at once; launched, once the run is submitted."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def launchers(sources: list[str], tags: dict[str, str], log_level: str) -> Iterator[dict[str, Launcher]]:
    """The code server and one gated launcher per source (`tags` plus the source's
    partition); stopped on the way out, the launchers first."""
    verbose = log_level in ("DEBUG", "INFO")
    config = json.dumps(run_config(log_level))
    # A short folder: a Unix socket's path has a limit of about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="fresh-", dir="/tmp" if os.name == "posix" else None) as tmp:
        with ExitStack() as stack:
            folder = Path(tmp)

            def output(name: str) -> tuple[IO[str], IO[str] | int]:
                log = stack.enter_context(open(folder / name, "w+"))  # noqa: SIM115 - closed by the stack
                # Verbose: Dagster's lines on this process's stderr, so that stdout holds only
                # the summary (`--json` stays parseable).
                return log, STDERR_FD if verbose else log

            server = _start_server(folder, output("server.log"))
            stack.callback(server.stop)
            workspace = folder / "workspace.yaml"
            grpc_server = {"socket": str(server.socket), "location_name": LOCATION}
            workspace.write_text(yaml.safe_dump({"load_from": [{"grpc_server": grpc_server}]}))
            out: dict[str, Launcher] = {}
            for i, source in enumerate(dict.fromkeys(sources)):
                run_id = str(uuid.uuid4())
                cmd = [sys.executable, "-m", GATED, LAUNCHER, "job", "launch", "-w", str(workspace)]
                cmd += ["-l", LOCATION, "-j", JOB, "--run-id", run_id]
                cmd += ["--tags", json.dumps({**tags, PARTITION_TAG: source})]
                cmd += ["--config-json", config]
                log, where = output(f"launch-{i}.log")
                out[source] = Launcher(run_id, _popen("dagster job launch", cmd, where), log, server)
                stack.callback(out[source].stop)
            yield out


def _start_server(folder: Path, output: tuple[IO[str], IO[str] | int]) -> CodeServer:
    sock = folder / "grpc.sock"
    module, attribute = DEFINITIONS
    cmd = [sys.executable, "-m", GATED, SERVER, "api", "grpc", "--socket", str(sock)]
    cmd += ["-m", module]
    cmd += ["-a", attribute, "--location-name", LOCATION, "--heartbeat", "--heartbeat-timeout", str(SERVER_HEARTBEAT_S)]
    log, where = output
    return CodeServer(sock, _popen("dagster api grpc", cmd, where), log)


def _go(proc: subprocess.Popen[bytes]) -> None:
    """Say go to a gated process, once; one that died is reported by whoever waits for it."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.write(f"{GO}\n".encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass


def _popen(what: str, cmd: list[str], where: IO[str] | int) -> subprocess.Popen[bytes]:
    """A gated process: its stdin is the pipe its go comes through."""
    try:
        return subprocess.Popen(cmd, stdout=where, stderr=where, stdin=subprocess.PIPE)
    except OSError as exc:
        raise LaunchError(f"{what} did not start: {exc}") from exc
