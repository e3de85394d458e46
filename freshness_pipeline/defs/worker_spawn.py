"""What multiprocessing's spawn runs, in a code server, in place of a fresh Python for a run
worker: `worker_fork.py` points spawn here (`multiprocessing.set_executable`).

`python -I -S worker_spawn.py SOCKET PYTHON <spawn's arguments>` hands this process's open
file descriptors (its stdio, the pipe the run's pickled arguments come through, the
resource tracker's, the run's queues) with its arguments, working directory and
environment to the code server's preloaded fork on SOCKET, which forks the run worker from
itself and answers with its pid, then with its wait status once it has ended. This process
stands for the worker in the code server (which polls it) until then, and ends as the
worker ended. If nothing answers on SOCKET, it becomes the fresh Python that spawn would
have started (`os.execv` of PYTHON with spawn's arguments).

Standard library only, nothing else imported: it starts with `-I -S` for every run.
"""

import json
import os
import re
import signal
import socket
import sys
import time

# The program spawn gives a child process (`python -c`), and its arguments.
SPAWN_MAIN = re.compile(r"from multiprocessing\.spawn import spawn_main; spawn_main\(((?:\w+=\d+(?:, )?)*)\)")


def spawn_arguments(args: list[str]) -> dict[str, int] | None:
    """The keyword arguments of `spawn_main` in spawn's command line; None for any other
    command (the resource tracker's, which spawn's executable starts too)."""
    for arg in args:
        if found := SPAWN_MAIN.fullmatch(arg):
            pairs = (pair.split("=") for pair in found[1].split(", ") if pair)
            return {name: int(value) for name, value in pairs}
    return None


def main() -> None:
    """Hand this process to the preloaded fork, wait for the worker and end as it did."""
    path, python, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if spawn_arguments(args) is None:  # not a run worker: Python runs it, as spawn would
        os.execv(python, [python, *args])
    fds = open_fds()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = json.dumps({"args": args, "fds": fds, "cwd": os.getcwd(), "env": dict(os.environ)})
        data = request.encode()
        socket.send_fds(conn, [len(data).to_bytes(4, "big")], fds)
        conn.sendall(data)
        replies = conn.makefile("r")
        pid = int(replies.readline())
    except (OSError, ValueError):  # no fork to hand over to: be the fresh Python instead
        conn.close()
        os.execv(python, [python, *args])
    # A terminal's Ctrl-C reaches the worker itself (one process group); the code server
    # stops a run through its own event, not a signal. A SIGTERM meant for this process
    # is the worker's.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: os.kill(pid, signum))
    status = replies.readline()
    if not status.strip():  # the fork is gone: wait for the worker by its pid
        while _exists(pid):
            time.sleep(0.2)
    _end_as(int(status) if status.strip() else None)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def open_fds() -> list[int]:
    """This process's open descriptors (a launcher's: what spawn passed, and its stdio)."""
    listing = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    fds = []
    for name in os.listdir(listing):
        fd = int(name)
        try:
            os.fstat(fd)
        except OSError:  # the listing's own descriptor, closed by now
            continue
        fds.append(fd)
    return sorted(fds)


def _end_as(status: int | None) -> None:
    """Exit as the worker did; without its status (the fork is gone), as a failed process."""
    if status is None:
        sys.exit(1)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
