"""The heap a stage freed goes back to the operating system (glibc's `malloc_trim`), and
imports run without cyclic garbage collections."""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from freshness_pipeline.adapters.memory import _trim, collections_paused

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


def test_a_paused_stretch_that_imports_runs_no_collection_and_is_left_out_of_later_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "paused_probe.py").write_text("TABLES = [[] for _ in range(50_000)]\n")  # allocations
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "paused_probe", raising=False)
    gc.enable()
    collections: list[int] = []
    gc.callbacks.append(count := lambda phase, info: phase == "start" and collections.append(1))
    frozen = gc.get_freeze_count()
    try:
        with collections_paused():
            assert not gc.isenabled()
            probe = importlib.import_module("paused_probe")
        assert collections == []
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(probe.TABLES)
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()


def test_a_paused_stretch_that_imports_nothing_freezes_nothing() -> None:
    frozen = gc.get_freeze_count()
    with collections_paused():
        garbage = [[] for _ in range(1000)]
    assert gc.get_freeze_count() == frozen and garbage


def test_a_pause_leaves_a_collector_that_was_off_off_even_when_the_block_fails() -> None:
    gc.disable()
    try:
        with pytest.raises(RuntimeError), collections_paused():
            raise RuntimeError("boom")
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


_LOCATION_LOAD = textwrap.dedent(
    """
    import gc
    import dagster  # Dagster's own import is Dagster's to tune
    import freshness_pipeline.adapters.memory

    collections = []
    gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
    import freshness_pipeline.defs.definitions
    print(len(collections), gc.isenabled())
    """
)


def test_the_code_location_loads_without_collections() -> None:
    out = subprocess.run([sys.executable, "-c", _LOCATION_LOAD], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True"], out.stdout + out.stderr
