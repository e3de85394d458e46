"""How `liveness.py` tells a dead run: a pid is alive only while its process runs and only
if that process is not newer than the event that named it (pid reuse)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from freshness_pipeline.defs.liveness import _alive


def test_a_running_process_named_after_it_started_is_alive() -> None:
    assert _alive(os.getpid(), time.time())


def test_an_exited_process_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not _alive(child.pid, time.time())


def test_a_process_newer_than_the_event_is_a_reused_pid() -> None:
    assert not _alive(os.getpid(), time.time() - 3600 * 24 * 365 * 30)
