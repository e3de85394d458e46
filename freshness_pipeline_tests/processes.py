"""The process tree as /proc shows it (Linux; psutil is not a dependency), for the tests that
check which process started which; and the process groups the tests start, ended whole
however the suite ends."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def parent_pid(pid: int) -> int:
    """The parent of a running process."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def parent_or_none(pid: int) -> int | None:
    """The parent, or None once the process is gone."""
    try:
        return parent_pid(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None


def children(pid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and parent_or_none(int(p.name)) == pid]


def descendants(pid: int) -> list[int]:
    """Every process under `pid`: its children, theirs, and so on."""
    found = children(pid)
    return found + [d for child in found for d in descendants(child)]


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def as_in_a_terminal() -> None:
    """`preexec_fn` for a command the test will Ctrl-C: its SIGINT as a terminal leaves it,
    whatever the suite inherited (a background job of a shell without job control, such as
    `make test &` in a script, starts with SIGINT ignored, and its children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_GROUPS: set[int] = set()  # the process groups the tests started (each led by its first process)


def in_own_group(cmd: Sequence[str | os.PathLike[str]], **popen: Any) -> subprocess.Popen[Any]:
    """`cmd` started as the leader of a process group of its own (its children join it), so
    that the whole tree can be ended at once, by the test or, if the suite ends or is
    interrupted before the test does, by `end_groups`."""
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    _GROUPS.add(proc.pid)
    return proc


def stop_group(proc: subprocess.Popen[Any], grace_s: float = 60) -> None:
    """End `proc`'s process group (a server and what it started) as Ctrl-C would, then by
    SIGKILL if it has not ended within `grace_s`."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def end_groups(*_: object) -> None:
    """SIGKILL whatever is left of every process group `in_own_group` started: at exit, and
    on SIGTERM or SIGHUP (`conftest.py`), which would otherwise end pytest without its
    fixtures' teardown."""
    for group in sorted(_GROUPS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    _GROUPS.clear()


atexit.register(end_groups)
