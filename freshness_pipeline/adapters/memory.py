"""Handing the heap a finished stage freed back to the operating system.

Every step of a run executes in one process by default (Dagster's in-process executor), and
glibc keeps what a stage freed: a large crawl leaves hundreds of MiB of free heap, spread
over its many small allocations and its fetch threads' arenas, and the next stage grows on
top of it. `malloc_trim` returns the free pages. There is no library for this one call
(Dask's workers make the same one through ctypes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache


@cache
def _trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to hand back this way
        return None


def release_freed_memory() -> bool:
    """Give the process's free heap pages back; whether any were (False where the C library
    has no `malloc_trim`)."""
    trim = _trim()
    return bool(trim(0)) if trim is not None else False
