"""Run workers forked from their loaded code server, instead of spawned fresh.

Dagster's code server starts each run in a fresh interpreter (`multiprocessing`'s spawn
context, fixed in `dagster/_grpc/server.py`), which imports Dagster, its storage and the
code location again before the run starts: 1.5 s of every launched run's start on a 2-core
host, while the code server, with all of it loaded, waits. Dagster has no setting to keep
a run worker warm or to fork one (docs/dagster.md).

`start_in_code_server` (at the end of the code location's import, `definitions.py`: in a
code server, once all that is loaded and before it serves) calls `start`, which forks a
preloaded copy of the server, which forks a run worker from itself for each run,
and points spawn at `worker_spawn.py` (`multiprocessing.set_executable`, the standard
library's setting for what spawn runs). Spawn still makes each run worker's process as
usual, with the descriptors of the run's pipes and queues; that process hands them to the
preloaded copy, and the forked worker reads the run from them and runs it exactly as a
spawned one does (`multiprocessing.spawn.spawn_main`, what spawn runs in the fresh Python).
Everything else of the run (its events, its pid in them, a Ctrl-C, the code server's
watch) is as with spawn. Where a fork cannot be made (no `os.fork`, a thread already
running), or the preloaded copy is gone, spawn starts a fresh Python as before.

A code server is `dagster api grpc`: the one `freshness run` starts (`gated.py`) and those
that the daemon, the webserver and `dagster dev` start for the workspace, which live for
hours. A run worker runs the code its code server loaded, as the sensors and the UI's
snapshots do: a changed package or location takes effect when the location is reloaded
(a new code server), as Dagster asks anyway. The preloaded copy ends when the code server
does (the pipe it holds closes), removing its socket's folder. Unix only; Linux lists a
process's descriptors in /proc, macOS in /dev/fd.
"""

from __future__ import annotations

import fcntl
import gc
import json
import multiprocessing
import os
import select
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from multiprocessing import spawn
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

from .worker_spawn import open_fds, spawn_arguments

MAX_REQUEST = 1 << 20
CODE_SERVER = ["api", "grpc"]  # the arguments of Dagster's code server: `python -m dagster api grpc ...`
SPAWNED = "--multiprocessing-fork"  # on the command line of every interpreter spawn starts
_forking = False  # whether this process (or the one it was forked from) started a copy
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None  # signal.getsignal's


class Request(NamedTuple):
    """One run worker to fork: spawn's arguments, and the process's descriptors, working
    directory and environment."""

    args: list[str]
    fds: dict[int, int]  # number in the worker -> descriptor received
    cwd: str
    env: dict[str, str]


def start_in_code_server() -> bool:
    """In a code server (its arguments are Dagster's `api grpc`, and its interpreter was not
    started by spawn, which gives a run worker spawned fresh its server's arguments):
    `start` in a new temporary folder, which the copy removes. Whether a copy was forked.
    Once per process tree: a worker forked from the copy knows it was (`_forking`), and has
    the code location loaded already."""
    if _forking or sys.argv[1:3] != CODE_SERVER or SPAWNED in sys.orig_argv:
        return False
    folder = Path(tempfile.mkdtemp(prefix="freshness-fork-"))
    if start(folder / "fork.sock", remove=folder):
        return True
    shutil.rmtree(folder, ignore_errors=True)
    return False


def start(path: Path, *, remove: Path | None = None) -> bool:
    """Fork the preloaded copy, listening on `path`, and point spawn at it; whether it
    was. Call once everything a run worker needs is imported, with one thread running. The
    copy removes the folder `remove` when it ends."""
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds") or threading.active_count() > 1:
        return False
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(16)
    except OSError:
        listener.close()
        return False
    alive_r, alive_w = os.pipe()  # the server holds alive_w until it ends
    sigint = signal.getsignal(signal.SIGINT)  # a spawned worker's too (ignored stays ignored)
    gc.freeze()  # what is loaded lives as long: the workers' collections leave it out, as the server's
    global _forking
    _forking = True
    if os.fork() == 0:
        try:  # never back into the caller: the copy and its workers end here
            os.close(alive_w)
            _run_worker(_serve(listener, alive_r, sigint, remove))  # `_serve` returns only in a forked worker
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(1)
    os.close(alive_r)
    listener.close()
    shim = path.with_suffix(".sh")
    launcher = Path(__file__).with_name("worker_spawn.py")
    python = sys.executable
    command = " ".join(map(shlex.quote, [python, "-I", "-S", str(launcher), str(path), python]))
    shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    shim.chmod(0o700)
    multiprocessing.set_executable(str(shim))
    return True


def _serve(listener: socket.socket, alive: int, sigint: Handler, remove: Path | None) -> Request:
    """The preloaded copy: fork a run worker per request, answer its pid, then its wait
    status once it ended. Returns, in the forked worker only, the request to run; exits
    once the code server is gone, removing the folder `remove`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the runs
    sigterm = signal.getsignal(signal.SIGTERM)
    terminated: list[int] = []
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # SIGTERM: fork no more (spawn then starts fresh Pythons), answer the launchers of the
    # workers still running, end with the code server.
    signal.signal(signal.SIGTERM, lambda signum, _: terminated.append(signum))
    waiting: dict[int, socket.socket] = {}
    while True:
        listening = [] if listener.fileno() < 0 else [listener.fileno()]
        ready, _, _ = select.select([*listening, alive, wake_r], [], [])
        if alive in ready:  # the code server ended; its workers go on
            if remove is not None:
                shutil.rmtree(remove, ignore_errors=True)
            os._exit(0)
        if wake_r in ready:
            while _drained(wake_r):
                pass
            _reap(waiting)
        if terminated and listening:
            Path(listener.getsockname()).unlink(missing_ok=True)
            listener.close()
            continue
        if not listening or listener.fileno() not in ready:
            continue
        conn, _ = listener.accept()
        try:
            request = _receive(conn)
        except (OSError, ValueError, KeyError):  # the launcher then starts a fresh Python
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            for fd in (alive, wake_r, wake_w):
                os.close(fd)
            for other in (listener, conn, *waiting.values()):
                other.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            # As an exec leaves it: ignored stays ignored, a handler is the default again.
            signal.signal(signal.SIGTERM, signal.SIG_IGN if sigterm == signal.SIG_IGN else signal.SIG_DFL)
            signal.signal(signal.SIGINT, sigint if sigint is not None else signal.SIG_DFL)
            return request
        for fd in request.fds.values():
            os.close(fd)
        try:
            conn.sendall(f"{pid}\n".encode())
        except OSError:
            conn.close()
            continue
        waiting[pid] = conn


def _drained(fd: int) -> bool:
    try:
        return bool(os.read(fd, 512))
    except BlockingIOError:
        return False


def _reap(waiting: dict[int, socket.socket]) -> None:
    """Answer each ended worker's launcher with its wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"{status}\n".encode())
            except OSError:
                pass
            conn.close()


def _receive(conn: socket.socket) -> Request:
    head, fds, _, _ = socket.recv_fds(conn, 4, 256)
    size = int.from_bytes(head, "big")
    if len(head) != 4 or size > MAX_REQUEST:
        for fd in fds:
            os.close(fd)
        raise ValueError("not a request")
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    sent = json.loads(data)
    numbers = [int(n) for n in sent["fds"]]
    if len(numbers) != len(fds):
        for fd in fds:
            os.close(fd)
        raise ValueError("descriptors missing")
    return Request(list(sent["args"]), dict(zip(numbers, fds, strict=True)), sent["cwd"], dict(sent["env"]))


def _run_worker(request: Request) -> None:
    """In the forked worker: take the launcher's descriptors at their numbers, its
    directory and environment, close the rest, and run what spawn runs. Exits with the run."""
    arguments = spawn_arguments(request.args)
    if arguments is None:  # the launcher hands over nothing else
        os._exit(1)
    floor = max([*request.fds, *request.fds.values()]) + 1
    moved = {n: fcntl.fcntl(fd, fcntl.F_DUPFD, floor) for n, fd in request.fds.items()}  # out of the way
    for fd in request.fds.values():
        os.close(fd)
    for number, fd in moved.items():
        os.dup2(fd, number)
        os.close(fd)
    for fd in open_fds():
        if fd not in request.fds:
            os.close(fd)
    os.chdir(request.cwd)
    gc.enable()  # as in a fresh Python, whatever the server's import had paused
    os.environ.clear()
    os.environ.update(request.env)
    sys.argv = ["-c", SPAWNED]
    try:
        spawn.spawn_main(**arguments)
    except SystemExit as done:
        # As multiprocessing's own forked children end: the run's process has waited for its
        # threads, run its finalizers and flushed its output (`BaseProcess._bootstrap`).
        # Python's teardown would only write to, and so copy, every page shared with the copy.
        os._exit(done.code if isinstance(done.code, int) else 1)
    os._exit(0)
