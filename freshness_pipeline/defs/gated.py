"""The main module of a launched refresh's code server, and the first module of a run
worker it spawns fresh.

`python -m freshness_pipeline.defs.gated <dagster's arguments>` (`launch.py`: `api grpc
...`) imports Dagster, Dagster's storage modules (through an in-memory instance,
`DagsterInstance.ephemeral`) and the code location, whose import ends by forking the
preloaded copy its run workers are forked from (`worker_fork.py`), then waits for the
caller's go on stdin and runs `python -m dagster` with the arguments. Nothing before the
go opens the home's instance, which the caller makes alone (two processes making a fresh
home's storage at once leave it broken).

Where no run worker can be forked, Dagster's code server starts the run in a fresh
interpreter (multiprocessing's spawn), and spawn starts by importing the parent's main
module, as `__mp_main__`: this one. So such a run worker too imports Dagster here, before
its run, with the cyclic garbage collector kept out (`adapters/memory.py`) instead of
walking Dagster's objects again and again. No process run from here makes Python's final
collections at exit.
"""

import atexit
import gc
import runpy
import sys

from freshness_pipeline.adapters.memory import collections_paused

atexit.register(gc.freeze)  # no collections at exit (as `cli.entry`)
with collections_paused():  # all that a run worker does here
    import dagster


def main() -> None:
    """Load the code location, wait for the go, then run Dagster's CLI on `sys.argv`."""
    from freshness_pipeline.defs.launch import GO

    with collections_paused():
        dagster.DagsterInstance.ephemeral().dispose()  # before the copy is forked
        import freshness_pipeline.defs.definitions  # noqa: F401 - the code location
    if sys.stdin.readline().strip() != GO:
        sys.exit(0)
    # `__main__` stays this module (alter_sys=False), for the run workers' spawn.
    runpy.run_module("dagster", run_name="__main__", alter_sys=False)


if __name__ == "__main__":
    main()
