"""The state store's repositories on SQLite and on the real local Postgres: pages, the
manifest commit, key redirects, the embedding cache, write-ahead intents and the lock."""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest

from freshness_pipeline.adapters.state.store import SourceBusy, StateStore, migrate
from freshness_pipeline.core.fingerprint import content_hash
from freshness_pipeline.core.models import Move, Plan, Section
from freshness_pipeline.core.state import ChangeEvent, PageRow, SourceState


@pytest.fixture
def url(any_state_url: str) -> str:
    """A state database at the newest schema, on SQLite and on Postgres."""
    migrate(any_state_url)
    return any_state_url


def sec(key: str, text: str, url: str = "http://d.test/p", simhash: int | None = (1 << 63) + 5) -> Section:
    return Section(
        key, 0, url, ("Page", key), 0, text, text, content_hash(text), simhash, 3, title="P", as_of="2026-06"
    )


def state(source: str = "docs") -> SourceState:
    return SourceState(source, "n1", "c1", "m", 4)


def commit(store: StateStore, plan: Plan, gen: int, **kw) -> None:
    store.manifest.commit(
        state(plan.source),
        [plan],
        base_generation=gen,
        replace_all=kw.get("replace_all", False),
        signatures=kw.get("signatures", {}),
        events=kw.get("events", []),
        run={"run_id": "r", "started_at": 1.0, "finished_at": 2.0, "counts": {"embedded": 1}},
    )


def test_commit_applies_plan_and_bumps_generation(url: str) -> None:
    store = StateStore(url)
    store.pages.save([PageRow("docs", "http://d.test/p", "http://d.test/p/", markdown="# P", text_hash="h")])
    a, b = sec("a", "alpha"), sec("b", "beta")
    commit(
        store,
        Plan("docs", new=[a, b]),
        0,
        signatures={"http://d.test/p": "sig1"},
        events=[ChangeEvent("http://d.test/p", "new", None, ("a", "b"))],
    )
    got = {s.id: s for s in store.manifest.sections("docs")}
    assert got == {a.id: a, b.id: b}  # simhash round-trips through the signed column
    assert store.sources.get("docs").generation == 1
    assert store.pages.load("docs")["http://d.test/p"].indexed_signature == "sig1"

    b2, c = sec("b", "beta v2"), sec("c", "alpha")
    plan = Plan("docs", changed=[b2], moved=[Move(a.id, c)], key_redirects=[("a", "c")])
    commit(store, plan, 1)
    assert store.manifest.hashes("docs") == {b2.id: b2.content_hash, c.id: c.content_hash}
    assert store.manifest.resolve_key("docs", "a") == ("c", ["a"])
    assert [r["counts"] for r in store.runs.recent("docs")] == [{"embedded": 1}, {"embedded": 1}]


def test_stale_plan_is_refused_and_changes_nothing(url: str) -> None:
    store = StateStore(url)
    commit(store, Plan("docs", new=[sec("a", "alpha")]), 0)
    with pytest.raises(RuntimeError, match="changed since this plan was made"):
        commit(store, Plan("docs", new=[sec("b", "beta")]), 0)
    assert set(store.manifest.hashes("docs")) == {"a:0"}


def test_replace_all_swaps_the_whole_manifest(url: str) -> None:
    store = StateStore(url)
    commit(store, Plan("docs", new=[sec("a", "alpha"), sec("b", "beta")]), 0)
    commit(store, Plan("docs", new=[sec("c", "gamma")]), 1, replace_all=True)
    assert set(store.manifest.hashes("docs")) == {"c:0"}


def test_embedding_cache_round_trip(url: str) -> None:
    store = StateStore(url)
    v = np.arange(4, dtype=np.float32)
    store.vector_cache.put("m", 4, {"h1": v})
    store.vector_cache.put("m", 4, {"h1": v + 1})  # first write wins: same text, same vector
    got = store.vector_cache.get("m", 4, ["h1", "h2"])
    assert list(got) == ["h1"] and np.array_equal(got["h1"], v)
    assert store.vector_cache.get("other-model", 4, ["h1"]) == {}


def test_pending_intents_cleared_by_commit(url: str) -> None:
    store = StateStore(url)
    store.intents.add("docs", "docs-v1", ["a:0", "b:0"])
    store.intents.add("docs", "docs-v1", ["a:0"])
    assert store.intents.pending("docs") == {"docs-v1": {"a:0", "b:0"}}
    commit(store, Plan("docs", new=[sec("a", "alpha")]), 0)
    assert store.intents.pending("docs") == {}


def _hold_lock(url: str, ready, release) -> None:  # runs in a child process
    store = StateStore(url)
    with store.locks.lock("docs"):
        ready.set()
        release.wait(10)


def test_second_run_on_a_source_is_refused_while_the_first_holds_it(url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_lock, args=(url, ready, release))
    child.start()
    try:
        assert ready.wait(30)
        store = StateStore(url)
        with pytest.raises(SourceBusy, match="being refreshed by another run"):
            with store.locks.lock("docs"):
                pass
        with store.locks.lock("other-source"):  # other sources are not blocked
            pass
    finally:
        release.set()
        child.join(10)
    with store.locks.lock("docs"):  # released with the holder
        pass


def test_a_bounded_wait_gives_up_after_its_bound_or_takes_the_lock_let_go(url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_lock, args=(url, ready, release))
    child.start()
    store = StateStore(url)
    try:
        assert ready.wait(30)
        started = time.monotonic()
        with pytest.raises(SourceBusy), store.locks.lock("docs", wait=0.5):
            pass
        assert time.monotonic() - started >= 0.5  # waited its bound, no less
        release.set()  # let go while the next one waits
        with store.locks.lock("docs", wait=30):
            pass
    finally:
        release.set()
        child.join(10)
        store.close()


def test_runs_executed_under_the_run_lock_are_recorded_with_their_holder(url: str) -> None:
    store = StateStore(url)
    try:
        store.runs.record_local("run-1", "docs", 1.0, "host pid 7")
        store.runs.record_local("run-2", "other", 1.0, "host pid 8")
        assert store.runs.local_holders("docs", ["run-1", "run-2", "run-3"]) == {"run-1": "host pid 7"}
    finally:
        store.close()


def test_lock_dies_with_a_killed_process(url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_lock, args=(url, ready, release))
    child.start()
    assert ready.wait(30)
    child.kill()
    child.join(10)
    deadline = time.time() + 10
    while True:
        try:
            with StateStore(url).locks.lock("docs"):
                break
        except SourceBusy:
            assert time.time() < deadline, "lock of a killed process was never released"
            time.sleep(0.2)


def test_saving_a_row_loaded_without_text_keeps_the_text(url: str) -> None:
    store = StateStore(url)
    store.pages.save([PageRow("docs", "http://d.test/p", "http://d.test/p/", markdown="# P\n\nbody", text_hash="h")])
    row = store.pages.load("docs", with_markdown=False)["http://d.test/p"]
    assert row.markdown is None
    row.etag = '"v2"'
    store.pages.save([row])
    assert store.pages.markdown("docs", ["http://d.test/p"]) == {"http://d.test/p": "# P\n\nbody"}
    assert store.pages.load("docs")["http://d.test/p"].etag == '"v2"'
