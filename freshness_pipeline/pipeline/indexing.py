"""Stage 4, `vector_index`: the commit protocol. The only place the manifest changes.

    recover -> write-ahead intents -> embed (cache first) -> upsert -> payload updates
            -> delete -> verify -> commit

A payload update (same retrieval text, new links, title or `as_of`) rewrites a record's
metadata in place: no embedding call, no vector written.

Every step is idempotent. A run that dies anywhere leaves the manifest as it was, plus
intents naming every id it may have written or deleted. The next run first *recovers*:
in the active namespace it puts every such id back to what the manifest says (re-upsert
from the embedding cache, or delete when the manifest does not know it) unless the run
itself rewrites it; an abandoned re-index namespace is dropped. Then it re-plans the same
work and takes its vectors from the cache (nothing paid twice). The manifest commit is
one transaction; retired namespaces are dropped after it (and again by the next run if
the process died in between).

The plan is read from the run's staging batch by batch (`plan_reader.py`): embedding,
upserts, payload updates, deletes and the commit stream over it. The counts it reports
come from the plan report it is handed (with the crawl's page counts, handed down) and
its own writes. `FRESHNESS_CRASH_AT` (`faults.py`) kills the process at a named point,
for the crash tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

from ..adapters.state.commit import StalePlan
from ..adapters.state.staging import rerun_hint
from ..adapters.vectorstores.base import VectorRecord
from ..core.run_counts import run_line
from ..core.spike import OVERRIDE_COUNT
from ..core.state import SourceState
from ..core.versions import namespace
from .context import SourceContext
from .faults import CRASH_ENV, CRASH_POINTS, crash_point
from .plan_reader import PlanReader
from .planning import PlanReport
from .records import UncachedVectorsError, embed_uncached, metadata, record, restore_from_manifest, vectors_for

__all__ = [
    "CRASH_ENV",
    "CRASH_POINTS",
    "GoldenGateError",
    "IncompleteIndexError",
    "IndexReport",
    "UncachedVectorsError",
    "apply_plan",
]


class IncompleteIndexError(RuntimeError):
    """After a re-index's writes, the new namespace does not hold exactly the records
    written: the commit is refused."""


@dataclass(slots=True)
class IndexReport:
    source: str
    namespace: str
    counts: dict[str, int | float] = field(default_factory=dict)
    reindex_reason: str | None = None
    seconds: float = 0.0

    def line(self) -> str:
        return run_line(self.counts)


@dataclass(slots=True)
class _Written:
    embedded: int = 0
    upserted: int = 0
    payload: int = 0
    deleted: int = 0
    hashes: dict[str, str] = field(default_factory=dict)  # re-index: id -> content hash written


def apply_plan(
    ctx: SourceContext,
    planned: PlanReport,
    *,
    run_id: str | None = None,
    spike_override: bool = False,
    before_commit: Callable[[], None] = lambda: None,
) -> IndexReport:
    """Commit the plan `planned` staged. `run_id`: the run recorded with it. `spike_override`:
    the run carries the operator's spike override; it is recorded in the run's counts so
    that the spike history leaves the run out. `before_commit` is called once the writes
    landed, before any is visible: raising there commits nothing (as a crash would)."""
    started = time.time()
    # `ctx.vectors` is opened on first use: a quiet run never pays for the vector store.
    src, store = ctx.source, ctx.store
    plan = PlanReader(ctx, planned)
    with store.locks.lock(src.name):
        _drop_retired(ctx)  # left over when a run died between its commit and its drop
        state = _current_state(ctx, planned)
        plan.require()
        reindex = plan.reindex
        target = state.active_version + 1 if reindex else state.active_version
        ns = namespace(src.name, target)

        removed, restored = _recover(ctx, state, ns, plan.owns)
        crash_point("recovered")
        for ids in plan.touched():
            store.intents.add(src.name, ns, ids)
        crash_point("intents")

        written = _write(ctx, ns, target, plan)
        golden: dict[str, float] = {}
        if reindex:
            removed += _verify_complete(ctx, ns, written.hashes)
            golden = _golden_gate(ctx, ns, plan.current_hashes)
        before_commit()
        if written.upserted or written.payload or written.deleted or removed or restored:
            # What readers see moves to this run's writes only now that all of them landed.
            ctx.vectors.mark_committed(ns)
        crash_point("verified")

        counts: dict[str, int | float] = {**_counts(planned, written, orphans=removed, reindex=reindex), **golden}
        counts |= {"restored": restored} | ({OVERRIDE_COUNT: 1} if spike_override else {})
        run = {"run_id": run_id, "started_at": started, "counts": counts, "reason": planned.reindex_reason}
        store.manifest.commit(
            _next_state(ctx, state, target, reindex=reindex),
            plan.manifest_changes(),
            base_generation=planned.base_generation,
            replace_all=reindex,
            signatures=plan.signatures(),
            events=store.plan_staging.events(src.name, planned.run_id),
            run={**run, "finished_at": time.time()},
            staged_run=planned.run_id,  # the crawl's page rows become the pages' only now
        )
        plan.drop()
        crash_point("committed")
        _drop_retired(ctx)
    report = IndexReport(src.name, ns, counts, planned.reindex_reason, time.time() - started)
    report.counts["seconds"] = round(report.seconds + planned.seconds + planned.upstream_seconds, 3)
    return report


def _next_state(ctx: SourceContext, state: SourceState, target: int, *, reindex: bool) -> SourceState:
    """The source's state once committed: built with the current versions, `target` active
    (a re-index retires the version it replaces)."""
    active_ns = namespace(ctx.name, state.active_version)
    retired = {*state.retired_namespaces, active_ns} if reindex else set(state.retired_namespaces)
    v = ctx.versions
    return replace(
        state,
        normalizer_version=v.normalizer,
        chunker_version=v.chunker,
        embed_model=v.model,
        embed_dims=v.dims,
        active_version=target,
        retired_namespaces=sorted(retired),
    )


def _current_state(ctx: SourceContext, planned: PlanReport) -> SourceState:
    state = ctx.store.sources.get(ctx.name)
    if state is None:
        raise RuntimeError(f"source {ctx.name!r} was never crawled; materialize fetched_pages first")
    if state.generation != planned.base_generation:
        raise StalePlan(
            f"source {ctx.name!r}: the plan of run {planned.run_id} is stale (planned at generation "
            f"{planned.base_generation}, the manifest is at {state.generation}); {rerun_hint(ctx.name)}"
        )
    return state


def _write(ctx: SourceContext, ns: str, version: int, plan: PlanReader) -> _Written:
    """Embed (cache first, every text before any upsert), upsert, update payloads in
    place, delete: each streamed over the staged plan."""
    out = _Written()
    total = None if plan.reindex else plan.report.written  # at most this many to embed
    out.embedded = embed_uncached(ctx, plan.upserts(), total=total)
    batch = ctx.settings.vector_store.upsert_batch
    pending: list[VectorRecord] = []  # across the staged batches: LanceDB's merge costs the table's size per call
    for part in plan.upserts():
        vecs, _ = vectors_for(ctx, part)  # all cached by now
        now = time.time()
        pending += [record(s, vecs[s.content_hash], ctx.name, version, now) for s in part]
        while len(pending) >= batch:
            ctx.vectors.upsert(ns, pending[:batch])
            del pending[:batch]
            crash_point("upsert")
        out.upserted += len(part)
        if plan.reindex:
            out.hashes.update((s.id, s.content_hash) for s in part)
    if pending:
        ctx.vectors.upsert(ns, pending)
        crash_point("upsert")
    for part in plan.payload():
        now = time.time()
        ctx.vectors.update_metadata(ns, {s.id: metadata(s, ctx.name, version, now) for s in part})
        out.payload += len(part)
        crash_point("payload")
    for ids in plan.deletes():
        ctx.vectors.delete(ns, ids)
        out.deleted += len(ids)
        crash_point("delete")
    return out


def _recover(
    ctx: SourceContext, state: SourceState, target_ns: str, owns: Callable[[Collection[str]], set[str]]
) -> tuple[int, int]:
    """Undo what crashed runs wrote, as named by their intents, except what this run
    rewrites itself (`owns`, in `target_ns`). Returns (records deleted, records restored).

    In the active namespace a touched id goes back to its manifest row (a crashed run may
    have overwritten or deleted it, and the site may since have reverted, so the plan will
    not touch it again) or is deleted when the manifest does not know it. A re-index
    namespace that is not this run's target was abandoned: it is dropped whole.
    """
    src, store = ctx.source, ctx.store
    active_ns = namespace(src.name, state.active_version)
    removed = restored = 0
    for ns, ids in store.intents.pending(src.name).items():
        todo = ids - owns(ids) if ns == target_ns else ids
        if ns == active_ns:
            d, r = restore_from_manifest(ctx, state, todo)
            removed, restored = removed + d, restored + r
        elif ns == target_ns:
            ctx.vectors.delete(ns, sorted(todo))
            removed += len(todo)
        else:
            ctx.vectors.drop_namespace(ns)
            removed += len(ids)
    return removed, restored


class GoldenGateError(RuntimeError):
    """A re-indexed version answers the golden set worse than the source allows."""


def _golden_gate(ctx: SourceContext, ns: str, current: Callable[[Collection[str]], dict[str, str]]) -> dict[str, float]:
    """Run the source's golden set (if any) against the re-indexed namespace before it
    becomes active; refuse the switch under `checks.golden_min_hit5`. `current`: the
    staged sections' content hashes of some pages (what is stale is read, not re-segmented)."""
    from .golden import evaluate, golden_file, load_golden

    path = golden_file(ctx.source)
    if path is None:
        return {}
    score = evaluate(ctx, load_golden(path), ns=ns, current=current).score
    floor = ctx.source.checks.golden_min_hit5
    if floor is not None and score.hit_at_5 < floor:
        raise GoldenGateError(
            f"{ns}: the re-indexed version answers hit@5 {score.hit_at_5:.2f} of the golden set "
            f"({path}), under checks.golden_min_hit5 {floor:.2f}; the active index is unchanged. "
            f"Misses: {'; '.join(score.misses[:10])}"
        )
    return {"golden_hit_at_1": score.hit_at_1, "golden_hit_at_5": score.hit_at_5, "golden_mrr": score.mrr}


def _verify_complete(ctx: SourceContext, ns: str, expected: dict[str, str]) -> int:
    """Before a re-index moves the active pointer: the new namespace must hold exactly the
    records written. Extras (left by an earlier attempt) are deleted; a missing or wrong
    record refuses the commit. Returns the number of extras deleted."""
    held = ctx.vectors.list_hashes(ns)
    extra = sorted(held.keys() - expected.keys())
    if extra:
        ctx.vectors.delete(ns, extra)
    missing = expected.keys() - held.keys()
    wrong = [i for i in expected.keys() & held.keys() if held[i] != expected[i]]
    if missing or wrong:
        raise IncompleteIndexError(
            f"{ns}: after writing, the store holds {len(missing)} missing and {len(wrong)} "
            "mismatched records; the active index is unchanged"
        )
    return len(extra)


def _drop_retired(ctx: SourceContext) -> None:
    state = ctx.store.sources.get(ctx.name)
    if state and state.retired_namespaces:
        for ns in state.retired_namespaces:
            ctx.vectors.drop_namespace(ns)
            crash_point("dropped")
        state.retired_namespaces = []
        ctx.store.sources.save(state)


def _counts(p: PlanReport, w: _Written, *, orphans: int, reindex: bool) -> dict[str, int]:
    """The run's counts: pages from the crawl's counts (handed down in the plan report) and
    the plan's change events, records from the plan and what this stage wrote."""
    crawl = p.crawl_counts
    crawled, errors, skipped, held, dead = (
        int(crawl.get(k, 0)) for k in ("crawled", "errors", "skipped", "held", "dead_links")
    )
    new, changed, gone = p.pages["new"], p.pages["changed"], p.pages["gone"]
    c = p.counts
    kept = 0 if reindex else c["unchanged"] + c["payload_updated"]  # their vectors stay
    planned = {k: 0 if reindex else c[k] for k in ("changed", "moved", "removed", "payload_updated")}
    return {
        "crawled": crawled,
        "new": new,
        "changed": changed,
        "unchanged": max(0, crawled - new - changed - gone - errors - skipped - held - dead),
        "gone": gone,
        "errors": errors,
        "skipped": skipped,  # not checked this run (robots, size, type, ...)
        "held": held,  # answered, not taken: the quarantine's holds, soft 404s, failed extractions
        "dead_links": dead,  # answered 404/410, not indexed: never, or no longer
        "flagged": int(crawl.get("flagged", 0)),
        "embedded": w.embedded,
        "upserted": w.upserted,
        "payload_updated": planned["payload_updated"],
        "deleted": w.deleted,
        "reused": kept + w.upserted - w.embedded,
        "orphans_removed": orphans,
        "sections_new": c["new"],  # new on the site (a re-index writes every section: `upserted`)
        "sections_changed": planned["changed"],
        "sections_moved": planned["moved"],
        "sections_removed": planned["removed"],
        "sections_fuzzy_unchanged": c["fuzzy_unchanged"],
        "sections_indexed_before": p.indexed_before,
        "sections_indexed": w.upserted if reindex else p.sections_indexed,
    }
