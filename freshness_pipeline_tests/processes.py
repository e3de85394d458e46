"""The process tree as /proc shows it (Linux; psutil is not a dependency), for the tests that
check which process started which."""

from __future__ import annotations

from pathlib import Path


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


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()
