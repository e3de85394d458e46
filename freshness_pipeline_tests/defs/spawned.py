"""What `test_worker_fork.py`'s spawned processes run (importable by name, as spawn needs)."""

import gc
import os
import signal
import sys
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

SET_BY = "the import"  # the server sets it at run time: only a fork of the server sees that


def report(queue: Queue, proceed: Event) -> None:
    """Say who it is and what it sees, wait for the go through an Event, exit with 3."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    queue.put({"pid": os.getpid(), "ppid": os.getppid(), "set_by": SET_BY, "sigint_ignored": ignored})
    print(f"worker {os.getpid()} writes to its stdout", flush=True)
    if not proceed.wait(60):
        sys.exit(1)
    sys.exit(3)


def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def code_server(queue: Queue) -> None:
    """Say whether this process, with its server's arguments (spawn gives it them), would
    fork a copy of its own as a code server does, and whether it collects garbage."""
    from freshness_pipeline.defs import worker_fork

    forks = worker_fork.start_in_code_server()
    queue.put({"ppid": os.getppid(), "argv": sys.argv[1:3], "forks": forks, "gc": gc.isenabled()})
