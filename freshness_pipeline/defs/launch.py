"""`dagster job launch`, started before the calling process imports Dagster.

A launched refresh waits on three process starts in a row: the launcher, the code server
it starts, the run worker that server spawns. The `freshness run` that launches also
imports Dagster (to reap dead runs, add the source's partition, then wait), which used to
come first. Here the launcher starts at once, imports Dagster beside the caller, and then
waits on its stdin for the caller's go (given once the partitions exist and dead runs are
reaped, so a new source's run never starts before its partition); a caller that stops
before its go closes the launcher's stdin and nothing is launched. No Dagster import in
this module: that is its point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

LAUNCH_ENV = "FRESHNESS_LAUNCH"  # "in-process": execute_in_process, no code location origin
EXECUTOR_ENV = "FRESHNESS_EXECUTOR"  # executors.py's setting, read here without importing Dagster
LOCATION = "freshness_pipeline"
JOB = "refresh"
PARTITION_TAG = "dagster/partition"
MODULE = {"module_name": "freshness_pipeline.defs.definitions", "attribute": "defs", "location_name": LOCATION}
WORKSPACE = {"load_from": [{"python_module": MODULE}]}
STDERR_FD = 2
GO = "go"
# `python -m dagster`, once the caller says go; Dagster's imports are made before.
GATED = (
    "import runpy, sys\n"
    "import dagster\n"
    f"if sys.stdin.readline().strip() != {GO!r}:\n"
    "    sys.exit(0)\n"
    "runpy.run_module('dagster', run_name='__main__', alter_sys=True)\n"
)


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
class Launcher:
    """A `dagster job launch` of one run: started, waiting for its go until `go()`."""

    run_id: str
    proc: subprocess.Popen[bytes]
    log: IO[str]

    def go(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(f"{GO}\n".encode())
                self.proc.stdin.close()
            except BrokenPipeError:  # it died: the caller's wait reports its log
                pass

    def stop(self) -> None:
        """Without its go it exits at once; launched, its code server shuts down once the
        run ended: give it a minute."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def launchers(sources: list[str], tags: dict[str, str], log_level: str) -> Iterator[dict[str, Launcher]]:
    """One gated launcher per source (`tags` plus the source's partition); stopped on the
    way out."""
    verbose = log_level in ("DEBUG", "INFO")
    config = json.dumps(run_config(log_level))
    with tempfile.TemporaryDirectory(prefix="freshness-launch-") as tmp, ExitStack() as stack:
        workspace = Path(tmp) / "workspace.yaml"
        workspace.write_text(yaml.safe_dump(WORKSPACE))
        out: dict[str, Launcher] = {}
        for i, source in enumerate(dict.fromkeys(sources)):
            run_id = str(uuid.uuid4())
            cmd = [sys.executable, "-c", GATED, "job", "launch", "-w", str(workspace), "-l", LOCATION, "-j", JOB]
            cmd += ["--run-id", run_id, "--tags", json.dumps({**tags, PARTITION_TAG: source}), "--config-json", config]
            log = stack.enter_context(open(Path(tmp) / f"launch-{i}.log", "w+"))  # noqa: SIM115 - closed by the stack
            # Verbose: Dagster's lines (the launcher's, its code server's) on this process's
            # stderr, so that stdout holds only the summary (`--json` stays parseable).
            where = STDERR_FD if verbose else log
            try:
                proc = subprocess.Popen(cmd, stdout=where, stderr=where, stdin=subprocess.PIPE)
            except OSError as exc:
                raise LaunchError(f"dagster job launch did not start: {exc}") from exc
            out[source] = Launcher(run_id, proc, log)
            stack.callback(out[source].stop)
        yield out
