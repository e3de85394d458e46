"""A process's memory and start-up, in one place: the heap a finished stage freed goes back
to the operating system, and the cyclic garbage collector keeps out of the imports and of
the exit.

Every step of a run executes in one process by default (Dagster's in-process executor), and
glibc keeps what a stage freed: a large crawl leaves hundreds of MiB of free heap, spread
over its many small allocations and its fetch threads' arenas, and the next stage grows on
top of it. `malloc_trim` returns the free pages. There is no library for this one call
(Dask's workers make the same one through ctypes).

Every process that runs Dagster imports several hundred thousand objects (Dagster, SQLAlchemy,
the code location) that live as long as it does; the collections their allocations trigger
walk them again and again. `collections_paused` keeps the collector out of such a stretch
and the objects out of later collections: around Dagster's import in `freshness run` and
around the code location's in every process that loads it. The `freshness` script also
skips Python's final collections (`cli.entry`). What each part saves, measured with
`bench/overhead.py`'s commands alternated with and without it: docs/benchmarks.md, "Run
overhead".
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache


@cache
def _trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:  # the C library this process runs on (`find_library` would start `ldconfig -p`)
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to hand back this way
        return None


def release_freed_memory() -> bool:
    """Give the process's free heap pages back; whether any were (False where the C library
    has no `malloc_trim`)."""
    trim = _trim()
    return bool(trim(0)) if trim is not None else False


@contextmanager
def collections_paused() -> Iterator[None]:
    """No cyclic garbage collection while the block runs; if it imported modules, every
    object made so far is then left out of later collections (`gc.freeze`: what an import
    makes lives as long as the process; a cycle made before is kept until the process
    exits). The collector is on again after it if it was before."""
    enabled = gc.isenabled()
    modules = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > modules:
            gc.freeze()
        if enabled:
            gc.enable()
