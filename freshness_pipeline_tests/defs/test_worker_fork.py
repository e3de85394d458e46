"""`worker_fork.py`: a process that multiprocessing's spawn starts is forked from the
preloaded copy of its parent, and behaves as a spawned one: its queue, event, stdout, exit
status and death by a signal reach the parent; with the copy gone, spawn starts a fresh
Python again; the copy ends with its parent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from freshness_pipeline.defs.worker_spawn import spawn_arguments

# The parent: sets a value at run time, starts the copy, then spawns processes.
PARENT = r"""
import json, multiprocessing, os, signal, sys, time
from pathlib import Path
from freshness_pipeline.defs import worker_fork
from freshness_pipeline_tests.defs import spawned

spawned.SET_BY = "the parent, after the import"
# Python's handler, as in a terminal, or ignored, as a background job of a shell starts
ignore = sys.argv[2] == "ignore-sigint"
signal.signal(signal.SIGINT, signal.SIG_IGN if ignore else signal.default_int_handler)
started = worker_fork.start(Path(sys.argv[1]))
ctx = multiprocessing.get_context("spawn")

def run(target):
    queue, proceed = ctx.Queue(), ctx.Event()
    process = ctx.Process(target=target, args=(queue, proceed) if target is spawned.report else ())
    process.start()
    seen = queue.get(timeout=60) if target is spawned.report else {}
    proceed.set()
    process.join(60)
    return {**seen, "exitcode": process.exitcode, "launcher": process.pid}

def parent_of(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])

first = run(spawned.report)
killed = run(spawned.killed)
copy = first["ppid"]
out = {"started": started, "me": os.getpid(), "sigint_ignored": ignore, "first": first, "killed": killed["exitcode"],
       "copy": copy, "copy_parent": parent_of(copy) if first["ppid"] != os.getpid() else None}
if sys.argv[2] == "kill-copy":
    os.kill(copy, signal.SIGKILL)
    os.waitpid(copy, 0)
    out["after_copy_killed"] = run(spawned.report)
print(json.dumps(out), flush=True)
"""


def _parent(tmp_path: Path, mode: str) -> tuple[dict, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", PARENT, str(tmp_path / "fork.sock"), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout, done.stderr


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # ended, not yet collected by whoever adopted it


def test_a_spawned_process_is_forked_from_the_preloaded_copy_and_reports_as_spawned(tmp_path: Path) -> None:
    seen, stdout, stderr = _parent(tmp_path, "keep")
    first = seen["first"]
    assert seen["started"] is True
    # Forked from the copy of the parent: it sees what the parent set after the import,
    # and its parent is the copy, whose parent is the spawning process.
    assert first["set_by"] == "the parent, after the import"
    assert first["ppid"] == seen["copy"] != seen["me"] and seen["copy_parent"] == seen["me"]
    # What spawn's own child would be: its pid is not the process spawn started (the
    # launcher), its queue and event worked, its exit status and its stdout reached the parent.
    assert first["pid"] != first["launcher"]
    assert first["exitcode"] == 3
    assert f"worker {first['pid']} writes to its stdout" in stdout
    assert seen["killed"] == -9
    assert "resource_tracker" not in stderr, stderr  # its own process, not a fork (below)
    deadline = time.monotonic() + 10
    while not _gone(seen["copy"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(seen["copy"]), "the preloaded copy outlived its parent"


def test_with_the_copy_gone_spawn_starts_a_fresh_python(tmp_path: Path) -> None:
    seen, _, _ = _parent(tmp_path, "kill-copy")
    assert seen["first"]["set_by"] == "the parent, after the import"
    fresh = seen["after_copy_killed"]
    assert fresh["set_by"] == "the import" and fresh["ppid"] == seen["me"] and fresh["exitcode"] == 3


def test_no_copy_is_made_while_a_thread_runs(tmp_path: Path) -> None:
    code = (
        "import multiprocessing.spawn as s, sys, threading, time; from pathlib import Path; "
        "from freshness_pipeline.defs import worker_fork; "
        "threading.Thread(target=time.sleep, args=(5,), daemon=True).start(); before = s.get_executable(); "
        "print(worker_fork.start(Path(sys.argv[1])), s.get_executable() == before)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "fork.sock")], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
    assert not (tmp_path / "fork.sock").exists()


def test_only_a_spawned_child_is_handed_to_the_copy() -> None:
    """What spawn runs for a child process goes to the copy with its arguments; anything
    else that runs spawn's executable (the resource tracker) is a fresh Python."""
    child = ["-B", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=12, pipe_handle=14)"]
    assert spawn_arguments([*child, "--multiprocessing-fork"]) == {"tracker_fd": 12, "pipe_handle": 14}
    assert spawn_arguments(["-c", "from multiprocessing.resource_tracker import main;main(5)"]) is None
    assert spawn_arguments(["-c", "import os; os.system('x'); from multiprocessing.spawn import spawn_main"]) is None


def test_a_forked_worker_keeps_its_parents_sigint_as_a_spawned_one_would(tmp_path: Path) -> None:
    """The copy ignores SIGINT (a terminal's Ctrl-C is for the runs); a worker gets the
    spawning process's own: Python's handler, or ignored where that process ignores it."""
    for mode, ignored in (("keep", False), ("ignore-sigint", True)):
        (tmp_path / mode).mkdir()
        seen, _, _ = _parent(tmp_path / mode, mode)
        assert seen["first"]["set_by"] == "the parent, after the import", mode
        assert seen["sigint_ignored"] is ignored and seen["first"]["sigint_ignored"] is ignored, (mode, seen)


# A code server as Dagster starts it (`python -m dagster api grpc ...`), its collections
# paused as `gated.py` pauses them while the code location loads.
CODE_SERVER = r"""
import gc, json, multiprocessing, os, signal, sys, time
from pathlib import Path
from freshness_pipeline.defs import worker_fork
from freshness_pipeline_tests.defs import spawned

mode = sys.argv[1]
out = {"other_command": worker_fork.start_in_code_server()}
sys.argv[1:] = ["api", "grpc", "--socket", "unused"]
gc.disable()
out["code_server"] = worker_fork.start_in_code_server()
out["again"] = worker_fork.start_in_code_server()
out["folder"] = str(Path(os.fsdecode(multiprocessing.spawn.get_executable())).parent)
ctx = multiprocessing.get_context("spawn")

def child():
    queue = ctx.Queue()
    process = ctx.Process(target=spawned.code_server, args=(queue,))
    process.start()
    seen = queue.get(timeout=60)
    process.join(60)
    return seen

out["forked"] = child()
if mode == "terminate-copy":
    os.kill(out["forked"]["ppid"], signal.SIGTERM)
    deadline = time.monotonic() + 10
    while (Path(out["folder"]) / "fork.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    out["socket_after_sigterm"] = (Path(out["folder"]) / "fork.sock").exists()
    out["fresh"] = child()
print(json.dumps(out), flush=True)
"""


def _code_server(tmp_path: Path, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CODE_SERVER, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_code_server_forks_its_copy_once_in_a_folder_the_copy_removes(tmp_path: Path) -> None:
    """`definitions.py` ends with `start_in_code_server`: only Dagster's code server (`api
    grpc`: the daemon's, the webserver's, `freshness run`'s) forks a copy, in a temporary
    folder of its own that the copy removes once the server ended; the workers forked from
    it, which get the server's arguments, fork none, and collect garbage again."""
    seen = _code_server(tmp_path, "exit")
    assert (seen["other_command"], seen["code_server"], seen["again"]) == (False, True, False), seen
    folder = Path(seen["folder"])
    assert folder.parent == tmp_path and folder.name.startswith("freshness-fork-")
    forked = seen["forked"]
    assert forked["argv"] == ["api", "grpc"] and forked["forks"] is False and forked["gc"] is True, forked
    deadline = time.monotonic() + 10
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not folder.exists(), "the copy left its folder after its code server ended"


def test_a_copy_stopped_by_sigterm_forks_no_more_and_ends_with_its_server(tmp_path: Path) -> None:
    """SIGTERM stops the copy's forks (its socket goes): spawn starts a fresh Python, which,
    given the server's arguments, forks no copy of its own. The copy ends with its server."""
    seen = _code_server(tmp_path, "terminate-copy")
    assert seen["socket_after_sigterm"] is False
    fresh = seen["fresh"]
    assert fresh["ppid"] != seen["forked"]["ppid"] and fresh["argv"] == ["api", "grpc"], seen
    assert fresh["forks"] is False and fresh["gc"] is True, fresh
    copy = seen["forked"]["ppid"]
    deadline = time.monotonic() + 10
    while (Path(seen["folder"]).exists() or not _gone(copy)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(seen["folder"]).exists() and _gone(copy)
