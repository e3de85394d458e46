"""The main module of a launched refresh's code server, and the first module of each run
worker it spawns: `python -m freshness_pipeline.defs.code_server <dagster's arguments>`
runs `python -m dagster` with them (`launch.py` passes `api grpc ...`) once the caller says
go on stdin.

Dagster's code server starts every run in a fresh interpreter (multiprocessing's spawn),
and spawn starts by importing the parent's main module, as `__mp_main__`: this one. So
each run worker too imports Dagster here, before its run, with the cyclic garbage
collector kept out (`adapters/memory.py`), instead of letting its collections walk
Dagster's objects again and again. The code server also loads the code location and
Dagster's storage modules (through an in-memory instance) before its go; nothing before
the go opens the home's instance, which the caller makes alone (two processes making a
fresh home's storage at once leave it broken).
"""

import atexit
import gc
import runpy
import sys

from freshness_pipeline.adapters.memory import collections_paused

atexit.register(gc.freeze)  # no collections at exit either (as `cli.entry`)
with collections_paused():
    import dagster

    if __name__ == "__main__":
        import freshness_pipeline.defs.definitions  # noqa: F401 - the code location, before the go

        dagster.DagsterInstance.ephemeral().dispose()

if __name__ == "__main__":
    from freshness_pipeline.defs.launch import GO

    if sys.stdin.readline().strip() != GO:
        sys.exit(0)
    # The CLI reads sys.argv; `__main__` stays this module, for the run workers' spawn.
    runpy.run_module("dagster", run_name="__main__", alter_sys=False)
