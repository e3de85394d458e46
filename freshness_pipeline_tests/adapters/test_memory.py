"""The heap a stage freed goes back to the operating system (glibc's `malloc_trim`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from freshness_pipeline.adapters.memory import _trim

_FREED_HEAP = textwrap.dedent(
    """
    import sys
    from freshness_pipeline.adapters.memory import release_freed_memory

    def rss_mib():
        return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024

    blocks = [bytes(4000) for _ in range(75_000)]  # ~300 MiB of malloc'd (not pymalloc) blocks
    pin = bytes(4000)  # malloc'd after them: the heap's top cannot shrink past it
    del blocks
    before = rss_mib()
    released = release_freed_memory()
    print(before, rss_mib(), released)
    """
)


@pytest.mark.skipif(_trim() is None, reason="no glibc malloc_trim on this platform (the release is a no-op there)")
def test_the_freed_heap_goes_back_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", _FREED_HEAP], capture_output=True, text=True, check=True)
    before, after, released = out.stdout.split()
    assert released == "True"
    assert float(before) - float(after) > 200, out.stdout  # MiB handed back
