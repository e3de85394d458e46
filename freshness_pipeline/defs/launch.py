"""A launched refresh: its code server, started before the calling process imports Dagster,
and `dagster job launch` through it.

A launched refresh needs two processes besides the caller: the code server, which loads
the code location, and the run worker, which the code server spawns for each run. The
code server (`dagster api grpc` on a socket of this command's, its main module `gated.py`,
which each run worker imports first too) starts before the caller's own imports and loads
side by side with them, then waits on its stdin for the caller's go: given once the caller
made the instance (two processes making a fresh home's storage at once leave it broken).
The caller creates and submits each run itself, by running Dagster's CLI, `dagster job
launch` against the code server, inside its own process (`Launcher.go`): once the
partitions exist, dead runs are reaped and the code server serves, so a new source's run
never starts before its partition. A launcher process of its own would import Dagster
once more, beside the caller and the code server, on the same cores. The code server
lives as long as the command: stopped once its runs' workers exited, and with Dagster's
heartbeat timeout as the backstop for a command that was killed. No Dagster import in this
module: that is its point (the launch imports Dagster's CLI when it runs).
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import yaml

LAUNCH_ENV = "FRESHNESS_LAUNCH"  # "in-process": execute_in_process, no code location origin
LOCATION = "freshness_pipeline"
JOB = "refresh"
PARTITION_TAG = "dagster/partition"
DEFINITIONS = ("freshness_pipeline.defs.definitions", "defs")
GATED = "freshness_pipeline.defs.gated"  # the code server's main module
STDERR_FD = 2
SERVER_READY_S = 300.0  # the code server's load, on a busy host
# Without the heartbeat of a workspace that manages it, the code server shuts down this long
# after it started, once its runs ended: a backstop for a command killed before it stopped it.
SERVER_HEARTBEAT_S = 900
GO = "go"


class LaunchError(RuntimeError):
    """The code server did not start, or `dagster job launch` did not submit the run (its
    error is in the message)."""


def in_process_runs(flag: bool | None = None) -> bool:
    """Whether refreshes run inside this process (`flag`, else $FRESHNESS_LAUNCH)."""
    return flag if flag is not None else os.environ.get(LAUNCH_ENV) == "in-process"


def run_config(log_level: str) -> dict[str, Any]:
    """The console's level (the executor is the location's: `executors.py`)."""
    return {"loggers": {"console": {"config": {"log_level": log_level}}}}


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
    """`dagster job launch` of one run through the command's code server, run in this
    process by `go()`."""

    run_id: str
    args: list[str]  # `dagster`'s arguments
    log: IO[str]  # its output (verbose: this process's stderr, so that stdout holds only the summary)
    verbose: bool
    server: CodeServer

    def go(self) -> None:
        """Once the code server serves, create and submit the run: queued for the daemon, or
        launched (returns once its worker started). Raises LaunchError if the code server did
        not start or the launch failed."""
        self.server.wait_ready()
        self.server.running.add(self.run_id)
        # A launch that failed stays in `running`: its run may have started all the same,
        # and the code server is then stopped gracefully.
        try:
            code = _dagster_cli(self.args, sys.stderr if self.verbose else self.log)
        except Exception as exc:  # noqa: BLE001 - whatever stopped it is the launch's error
            raise LaunchError(
                f"dagster job launch did not submit run {self.run_id}: {type(exc).__name__}: {exc}"
            ) from exc
        if code:
            self.log.seek(0)
            tail = self.log.read()[-3000:].strip() or f"exit code {code}"
            raise LaunchError(f"dagster job launch did not submit run {self.run_id}: {tail}")

    def ended(self) -> None:
        """The run ended and its worker exited."""
        self.server.running.discard(self.run_id)


def _dagster_cli(args: list[str], output: IO[str]) -> int:
    """`python -m dagster ARGS` inside this process (the CLI's public entry; a process of
    its own would import Dagster again), its output to `output`; its exit status. A Ctrl-C
    meanwhile is this process's KeyboardInterrupt, as anywhere else in the command."""
    argv = sys.argv
    sys.argv = ["dagster", *args]
    try:
        with _interrupts_noted() as interrupted, redirect_stdout(output), redirect_stderr(output):
            runpy.run_module("dagster", run_name="__main__", alter_sys=False)
    except SystemExit as done:  # click's way to end
        if interrupted:
            raise KeyboardInterrupt from None
        if isinstance(done.code, str):  # what Python would print, had it ended the process
            print(done.code, file=output)
        return done.code if isinstance(done.code, int) else int(done.code is not None)
    finally:
        sys.argv = argv
    return 0


@contextmanager
def _interrupts_noted() -> Iterator[list[int]]:
    """SIGINTs received inside, noted: click turns the KeyboardInterrupt of a Ctrl-C into
    "Aborted!" and exit(1), which would read as a failed launch and let the command go on.
    Only the main thread can set a handler; elsewhere (and where SIGINT is ignored) the
    handler stays as it was."""
    seen: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous == signal.SIG_IGN:
        yield seen
        return

    def note(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def launchers(sources: list[str], tags: dict[str, str], log_level: str) -> Iterator[dict[str, Launcher]]:
    """The code server, started, and one launcher per source (`tags` plus the source's
    partition); the code server stopped on the way out."""
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
                args = ["job", "launch", "-w", str(workspace), "-l", LOCATION, "-j", JOB, "--run-id", run_id]
                args += ["--tags", json.dumps({**tags, PARTITION_TAG: source}), "--config-json", config]
                log = stack.enter_context(open(folder / f"launch-{i}.log", "w+"))  # noqa: SIM115 - closed by the stack
                out[source] = Launcher(run_id, args, log, verbose, server)
            yield out


def _start_server(folder: Path, output: tuple[IO[str], IO[str] | int]) -> CodeServer:
    sock = folder / "grpc.sock"
    module, attribute = DEFINITIONS
    cmd = [sys.executable, "-m", GATED, "api", "grpc", "--socket", str(sock)]
    cmd += ["-m", module]
    cmd += ["-a", attribute, "--location-name", LOCATION, "--heartbeat", "--heartbeat-timeout", str(SERVER_HEARTBEAT_S)]
    log, where = output
    # The server is killed once its runs ended (`CodeServer.stop`), so the multiprocessing
    # resource tracker it started unlinks the semaphores of its runs' queues in its place and
    # warns that they leaked, on the server's stderr: the terminal, with --verbose.
    quiet = "ignore::UserWarning:multiprocessing.resource_tracker"
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), quiet]))
    return CodeServer(sock, _popen("dagster api grpc", cmd, where, {**os.environ, "PYTHONWARNINGS": warnings}), log)


def _go(proc: subprocess.Popen[bytes]) -> None:
    """Say go to a gated process, once; one that died is reported by whoever waits for it."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.write(f"{GO}\n".encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass


def _popen(what: str, cmd: list[str], where: IO[str] | int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A gated process: its stdin is the pipe its go comes through."""
    try:
        return subprocess.Popen(cmd, stdout=where, stderr=where, stdin=subprocess.PIPE, env=env)
    except OSError as exc:
        raise LaunchError(f"{what} did not start: {exc}") from exc
