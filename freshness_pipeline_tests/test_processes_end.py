"""Every process a test starts (`processes.in_own_group`: the services, the Celery workers)
ends with the suite however it is stopped: a Ctrl-C, or a SIGTERM that skips the fixtures'
teardown. A pytest session whose test started a process tree and hangs is stopped, and
nothing of that tree is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from freshness_pipeline_tests.processes import as_in_a_terminal

REPO = Path(__file__).resolve().parents[1]
# How long the stopped suite may take to start its tree and to end: the suite's own per-test
# bound (pytest-timeout's `timeout` in pyproject.toml), not a guess at a busy machine's speed.
SUITE_TIMEOUT_S = float(
    tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["timeout"]
)
HANGING = """
import threading
from pathlib import Path
from freshness_pipeline_tests.processes import in_own_group

def test_hangs_with_a_tree():
    tree = in_own_group(["bash", "-c", "sleep 600 & sleep 600"])
    Path({pid_file!r}).write_text(str(tree.pid))
    threading.Event().wait()  # hangs until the suite is stopped
"""


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(3 * SUITE_TIMEOUT_S)  # the stopped suite's start and end, each within its own bound
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_suite_leaves_no_process_of_its_tests(tmp_path: Path, sig: signal.Signals) -> None:
    pid_file = tmp_path / "tree.pid"
    (tmp_path / "test_hanging.py").write_text(HANGING.format(pid_file=str(pid_file)))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "freshness_pipeline_tests.conftest"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # As a terminal starts it: SIGINT not ignored, even where this suite was started in the
    # background of a shell without job control (which ignores SIGINT for all it starts).
    suite = subprocess.Popen(
        [*cmd, str(tmp_path / "test_hanging.py")], cwd=tmp_path, env=env, preexec_fn=as_in_a_terminal
    )
    group = None
    try:
        deadline = time.monotonic() + SUITE_TIMEOUT_S
        while not pid_file.exists() or not pid_file.read_text():
            assert suite.poll() is None and time.monotonic() < deadline, "the hanging test did not start its tree"
            time.sleep(0.2)
        group = int(pid_file.read_text())
        assert group_alive(group)
        suite.send_signal(sig)
        suite.wait(timeout=SUITE_TIMEOUT_S)
        deadline = time.monotonic() + SUITE_TIMEOUT_S  # SIGKILLed: gone once init reaps them
        while group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_alive(group), f"{sig.name}: the test's process tree outlived the suite"
    finally:
        if suite.poll() is None:
            suite.kill()
            suite.wait()
        if group is not None and group_alive(group):
            os.killpg(group, signal.SIGKILL)
