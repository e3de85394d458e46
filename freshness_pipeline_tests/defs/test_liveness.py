"""How `liveness.py` tells a dead run: a pid is alive only while its process runs and only
if that process is not newer than the event that named it (pid reuse); and how long it
waits for a finished run's worker (the launched case: `defs/test_runner.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from freshness_pipeline.defs.liveness import _alive, wait_for_run_worker
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import alive_pids, refresh
from freshness_pipeline_tests.sitegen import generate


def test_a_running_process_named_after_it_started_is_alive() -> None:
    assert _alive(os.getpid(), time.time())


def test_an_exited_process_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not _alive(child.pid, time.time())


def test_an_exited_process_its_parent_has_not_collected_yet_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    try:
        assert not _alive(child.pid, time.time())  # a zombie: exited, not waited for
    finally:
        child.wait()


def test_a_process_newer_than_the_event_is_a_reused_pid() -> None:
    assert not _alive(os.getpid(), time.time() - 3600 * 24 * 365 * 30)


def test_waiting_for_a_run_worker_that_still_runs_ends_at_the_timeout(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    site.publish(generate(2, sections_per_page=1, seed=3).markdown())
    run_id = refresh(instance).run_id  # in-process: the run's process is this one, still running
    assert alive_pids(instance, run_id) == [os.getpid()]
    started = time.monotonic()
    assert not wait_for_run_worker(instance, run_id, 0.3)
    assert 0.3 <= time.monotonic() - started < 5
