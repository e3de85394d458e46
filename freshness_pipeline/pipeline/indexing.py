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

`FRESHNESS_CRASH_AT=<point>[:<n>]` makes the process SIGKILL itself at the n-th pass of a
named point (see `CRASH_POINTS`); it exists for the crash tests and is a no-op unset.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Collection, Iterable, Sequence, Set
from dataclasses import dataclass, field, replace

import numpy as np

from .. import progress
from ..adapters.vectorstores.base import VectorRecord
from ..core.models import Plan, Section
from ..core.run_counts import run_line
from ..core.spike import OVERRIDE_COUNT
from ..core.state import ChangeEvent, SourceState
from ..core.versions import namespace
from .context import SourceContext
from .planning import StagedPlan

CRASH_ENV = "FRESHNESS_CRASH_AT"
CRASH_POINTS = ("recovered", "intents", "embed", "upsert", "payload", "delete", "verified", "committed", "dropped")
_passes: Counter[str] = Counter()


def _crash_point(name: str) -> None:
    """Fault injection for the crash tests: SIGKILL at the n-th pass of `name` when
    $FRESHNESS_CRASH_AT is `name[:n]`. A no-op when the variable is unset."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    _passes[name] += 1
    point, _, nth = spec.partition(":")
    if point == name and _passes[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


class UncachedVectorsError(RuntimeError):
    """Vectors wanted for another model than the configured embedder's are not in the
    embedding cache: nothing can make them."""


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


def apply_plan(
    ctx: SourceContext, staged: StagedPlan, *, run_id: str | None = None, spike_override: bool = False
) -> IndexReport:
    """Commit `staged`. `spike_override`: the run carries the operator's spike override; it
    is recorded in the run's counts so that the spike history leaves the run out."""
    started = time.time()
    # `ctx.vectors` is opened on first use: a quiet run never pays for the vector store.
    src, store = ctx.source, ctx.store
    with store.locks.lock(src.name):
        _drop_retired(ctx)  # left over when a run died between its commit and its drop
        state = _current_state(ctx, staged)
        v = ctx.versions
        reindex = staged.reindex_reason is not None
        active_ns = namespace(src.name, state.active_version)
        target, plan = _target_plan(ctx, staged, state)
        ns = namespace(src.name, target)
        upserts = plan.upserts
        deletes = [] if reindex else plan.deletes
        payload = [] if reindex else plan.payload
        touched = {s.id for s in upserts} | {s.id for s in payload} | set(deletes)

        removed, restored = _recover(ctx, state, ns, touched)
        _crash_point("recovered")
        store.intents.add(src.name, ns, touched)
        _crash_point("intents")

        embedded = _write(ctx, ns, target, upserts, payload, deletes)
        golden: dict[str, float] = {}
        if reindex:
            removed += _verify_complete(ctx, ns, {s.id: s.content_hash for s in upserts})
            golden = _golden_gate(ctx, ns)
        if upserts or payload or deletes or removed or restored:
            # What readers see moves to this run's writes only now that all of them landed.
            ctx.vectors.mark_committed(ns)
        _crash_point("verified")

        retired = {*state.retired_namespaces, active_ns} if reindex else set(state.retired_namespaces)
        new_state = replace(
            state,
            normalizer_version=v.normalizer,
            chunker_version=v.chunker,
            embed_model=v.model,
            embed_dims=v.dims,
            active_version=target,
            retired_namespaces=sorted(retired),
        )
        events = _events(staged, staged.plan)  # what changed, not what a re-index rewrote
        counts = _counts(
            staged, plan, events, embedded=embedded, deleted=len(deletes), orphans=removed, reindex=reindex
        )
        counts.update(golden, restored=restored)
        if spike_override:
            counts[OVERRIDE_COUNT] = 1
        store.manifest.commit(
            new_state,
            plan,
            base_generation=staged.base_generation,
            replace_all=reindex,
            signatures=staged.sections.signatures,
            events=events,
            run={
                "run_id": run_id,
                "started_at": started,
                "finished_at": time.time(),
                "counts": counts,
                "reason": staged.reindex_reason,
            },
        )
        _crash_point("committed")
        _drop_retired(ctx)
    report = IndexReport(src.name, ns, counts, staged.reindex_reason, time.time() - started)
    report.counts["seconds"] = round(report.seconds + _upstream_seconds(staged), 3)
    return report


def _current_state(ctx: SourceContext, staged: StagedPlan) -> SourceState:
    state = ctx.store.sources.get(ctx.name)
    if state is None:
        raise RuntimeError(f"source {ctx.name!r} was never crawled; materialize fetched_pages first")
    if state.generation != staged.base_generation:
        raise RuntimeError(
            f"source {ctx.name!r}: this diff_plan is stale (planned at generation "
            f"{staged.base_generation}, the manifest is at {state.generation}); "
            "re-materialize section_manifest and diff_plan"
        )
    return state


def _target_plan(ctx: SourceContext, staged: StagedPlan, state: SourceState) -> tuple[int, Plan]:
    """(index version to write, plan to apply): the staged plan, or for a re-index every
    current section into the next version."""
    if staged.reindex_reason is None:
        return state.active_version, staged.plan
    # A page that failed to segment keeps its indexed sections in the new version
    # (embedded again for the new model from their stored text): a re-index never
    # drops a page for a bad minute.
    errors = staged.sections.errors
    kept = ctx.store.manifest.sections(ctx.name, errors) if errors else []
    new = [*staged.plan.current, *kept]  # dated as the plan found them
    return state.active_version + 1, Plan(source=ctx.name, new=new, key_redirects=staged.plan.key_redirects)


def _write(
    ctx: SourceContext,
    ns: str,
    version: int,
    upserts: Sequence[Section],
    payload: Sequence[Section],
    deletes: Sequence[str],
) -> int:
    """Embed (cache first) and upsert, update payloads in place, delete. Returns the
    number of texts embedded."""
    vecs, embedded = vectors_for(ctx, upserts)
    now = time.time()
    batch = ctx.settings.vector_store.upsert_batch
    for i in range(0, len(upserts), batch):
        part = upserts[i : i + batch]
        ctx.vectors.upsert(ns, [_record(s, vecs[s.content_hash], ctx.name, version, now) for s in part])
        _crash_point("upsert")
    if payload:
        ctx.vectors.update_metadata(ns, {s.id: _metadata(s, ctx.name, version, now) for s in payload})
        _crash_point("payload")
    if deletes:
        ctx.vectors.delete(ns, list(deletes))
        _crash_point("delete")
    return embedded


def _recover(ctx: SourceContext, state: SourceState, target_ns: str, own: set[str]) -> tuple[int, int]:
    """Undo what crashed runs wrote, as named by their intents, except what this run
    rewrites itself (`own`, in `target_ns`). Returns (records deleted, records restored).

    In the active namespace a touched id goes back to its manifest row (a crashed run may
    have overwritten or deleted it, and the site may since have reverted, so the plan will
    not touch it again) or is deleted when the manifest does not know it. A re-index
    namespace that is not this run's target was abandoned: it is dropped whole.
    """
    src, store = ctx.source, ctx.store
    active_ns = namespace(src.name, state.active_version)
    removed = restored = 0
    for ns, ids in store.intents.pending(src.name).items():
        todo = ids - own if ns == target_ns else ids
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


def restore_from_manifest(ctx: SourceContext, state: SourceState, ids: Collection[str]) -> tuple[int, int]:
    """Make the active namespace hold exactly the manifest's record for each id: ids the
    manifest does not know are deleted, the others re-upserted (vectors from the cache, for
    the model the active index was built with). Returns (deleted, upserted)."""
    if not ids:
        return 0, 0
    ns = namespace(ctx.name, state.active_version)
    rows = ctx.store.manifest.by_id(ctx.name, ids)
    gone = sorted(set(ids) - {s.id for s in rows})
    if gone:
        ctx.vectors.delete(ns, gone)
    vecs, _ = vectors_for(ctx, rows, model=state.embed_model, dims=state.embed_dims)
    now = time.time()
    batch = ctx.settings.vector_store.upsert_batch
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        ctx.vectors.upsert(ns, [_record(s, vecs[s.content_hash], ctx.name, state.active_version, now) for s in part])
    return len(gone), len(rows)


def vectors_for(
    ctx: SourceContext, sections: Sequence[Section], *, model: str | None = None, dims: int | None = None
) -> tuple[dict[str, np.ndarray], int]:
    """Vectors by content hash: from the cache, else embedded (and cached batch by batch,
    so a crash loses at most one batch of paid work). Returns (vectors, texts embedded).

    `model`/`dims` name the cache entries wanted (default: the configured embedder's); a
    text missing there is embedded only when they are the configured embedder's."""
    v, store = ctx.versions, ctx.store
    model, dims = model or v.model, dims or v.dims
    wanted = {s.content_hash: s.embed_text for s in sections}
    vecs = store.vector_cache.get(model, dims, wanted.keys())
    missing = [h for h in wanted if h not in vecs]
    if missing and (model, dims) != (v.model, v.dims):
        raise UncachedVectorsError(
            f"{ctx.name}: {len(missing)} records of the active index ({model}, {dims}d) are not "
            f"in the embedding cache and the configured embedder is {v.model}, {v.dims}d; "
            "the next refresh re-indexes them"
        )
    batch = ctx.settings.embedder.batch_size
    for hashes in progress.batches(missing, batch, "embed", unit="sections"):
        rows = ctx.embedder.embed([wanted[h] for h in hashes])
        fresh = {h: np.asarray(rows[j], dtype=np.float32) for j, h in enumerate(hashes)}
        store.vector_cache.put(model, dims, fresh)
        vecs.update(fresh)
        _crash_point("embed")
    return vecs, len(missing)


def _record(s: Section, vec: np.ndarray, source: str, version: int, now: float) -> VectorRecord:
    return VectorRecord(id=s.id, vector=vec.tolist(), metadata=_metadata(s, source, version, now))


def _metadata(s: Section, source: str, version: int, now: float) -> dict[str, object]:
    """A record's payload: what a reader (or an answering model) sees with a hit."""
    return {
        "url": s.url,
        "key": s.key,
        "heading_path": s.heading,
        "content_hash": s.content_hash,
        "text": s.text,  # markdown, links kept
        "title": s.title,
        "as_of": s.as_of,
        "source": source,
        "chunk_index": s.chunk_index,
        "fetched_at": now,
        "index_version": version,
    }


class GoldenGateError(RuntimeError):
    """A re-indexed version answers the golden set worse than the source allows."""


def _golden_gate(ctx: SourceContext, ns: str) -> dict[str, float]:
    """Run the source's golden set (if any) against the re-indexed namespace before it
    becomes active; refuse the switch under `checks.golden_min_hit5`."""
    from .golden import evaluate, golden_file, load_golden

    path = golden_file(ctx.source)
    if path is None:
        return {}
    score = evaluate(ctx, load_golden(path), ns=ns).score
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
            _crash_point("dropped")
        state.retired_namespaces = []
        ctx.store.sources.save(state)


def _events(staged: StagedPlan, plan: Plan) -> list[ChangeEvent]:
    return change_events(plan.upserts, staged.removed_urls, staged.previous_urls, staged.sections.gone)


def change_events(
    upserts: Iterable[Section], removed_urls: Set[str], previous_urls: Set[str], gone: Iterable[str]
) -> list[ChangeEvent]:
    """One event per page: new or changed (its written sections' keys), or gone."""
    touched: dict[str, list[Section]] = {}
    for s in upserts:
        touched.setdefault(s.url, []).append(s)
    gone = sorted(gone)
    skip = set(gone)  # built once: not a list scan per page
    events = []
    for url in sorted(touched.keys() | removed_urls):
        if url in skip:
            continue
        kind = "changed" if url in previous_urls else "new"
        secs = touched.get(url, [])
        page_hash = secs[0].content_hash if len(secs) == 1 else None
        events.append(ChangeEvent(url, kind, page_hash, tuple(sorted({s.key for s in secs}))))
    events.extend(ChangeEvent(url, "gone", None, ()) for url in gone)
    return events


def _counts(
    staged: StagedPlan,
    plan: Plan,
    events: list[ChangeEvent],
    *,
    embedded: int,
    deleted: int,
    orphans: int,
    reindex: bool,
) -> dict[str, int]:
    crawl = staged.sections.crawl
    kinds = [e.kind for e in events]
    new, changed, gone = kinds.count("new"), kinds.count("changed"), kinds.count("gone")
    crawled = crawl.crawled if crawl else 0
    errors = len(crawl.errors) if crawl else 0
    skipped = len(crawl.skipped) if crawl else 0  # not checked this run (robots, size, type, ...)
    upserts = len(plan.upserts)
    kept = 0 if reindex else staged.counts.get("unchanged", 0) + len(plan.payload)  # their vectors stay
    return {
        "crawled": crawled,
        "new": new,
        "changed": changed,
        "unchanged": max(0, crawled - new - changed - gone - errors - skipped),
        "gone": gone,
        "errors": errors,
        "skipped": skipped,
        "flagged": len(crawl.flagged) if crawl else 0,
        "embedded": embedded,
        "upserted": upserts,
        "payload_updated": 0 if reindex else len(plan.payload),
        "deleted": deleted,
        "reused": kept + upserts - embedded,
        "orphans_removed": orphans,
        "sections_new": len(plan.new),
        "sections_changed": len(plan.changed),
        "sections_moved": len(plan.moved),
        "sections_removed": len(plan.removed),
        "sections_fuzzy_unchanged": len(staged.plan.fuzzy),
        "sections_indexed_before": staged.indexed_before,
        "sections_indexed": upserts
        if reindex
        else staged.indexed_before - len(set(plan.deletes)) + len({s.id for s in plan.upserts} - staged.previous_ids),
    }


def _upstream_seconds(staged: StagedPlan) -> float:
    crawl = staged.sections.crawl
    return staged.seconds + staged.sections.seconds + (crawl.seconds if crawl else 0.0)
