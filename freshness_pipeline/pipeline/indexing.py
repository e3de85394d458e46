"""Stage 4, `vector_index`: the commit protocol. The only place the manifest changes.

    write-ahead intents -> embed (cache first) -> upsert -> delete -> verify -> commit

Every step is idempotent. A run that dies anywhere leaves the manifest as it was, plus
intents naming every id it may have written; the next run deletes those that the manifest
does not know (no orphans), re-plans the same work and takes its vectors from the cache
(nothing paid twice). The manifest commit is one transaction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..adapters.state.store import ChangeEvent
from ..adapters.vectorstores.base import VectorRecord
from ..core.models import Plan, Section
from .context import SourceContext, namespace
from .planning import StagedPlan

UPSERT_BATCH = 500


class DriftError(RuntimeError):
    """The vector store does not hold what the manifest is about to say it holds."""


@dataclass(slots=True)
class IndexReport:
    source: str
    namespace: str
    counts: dict[str, int] = field(default_factory=dict)
    reindex_reason: str | None = None
    seconds: float = 0.0

    def line(self) -> str:
        c = self.counts
        return " ".join(f"{k}: {c.get(k, 0)}" for k in ("crawled", "new", "changed", "unchanged", "gone", "errors"))


def apply_plan(ctx: SourceContext, staged: StagedPlan, *, run_id: str | None = None) -> IndexReport:
    started = time.time()
    src, store, vectors = ctx.source, ctx.store, ctx.vectors
    with store.lock(src.name):
        state = store.source_state(src.name)
        if state is None:
            raise RuntimeError(f"source {src.name!r} was never crawled; materialize fetched_pages first")
        if state.generation != staged.base_generation:
            raise RuntimeError(
                f"source {src.name!r}: this diff_plan is stale (planned at generation "
                f"{staged.base_generation}, the manifest is at {state.generation}); "
                "re-materialize section_manifest and diff_plan"
            )
        v = ctx.versions
        reindex = staged.reindex_reason is not None
        active_ns = namespace(src.name, state.active_version)
        if reindex:
            target = state.active_version + 1
            plan = Plan(source=src.name, new=list(staged.sections.sections), key_redirects=staged.plan.key_redirects)
        else:
            target = state.active_version
            plan = staged.plan
        ns = namespace(src.name, target)
        upserts = plan.upserts
        keep_ids = {s.id for s in upserts}

        orphans = _clean_up_crashed_writes(ctx, active_ns, ns, keep_ids)
        store.add_pending(src.name, ns, keep_ids)

        vecs, embedded = _vectors_for(ctx, upserts)
        now = time.time()
        for i in range(0, len(upserts), UPSERT_BATCH):
            batch = upserts[i : i + UPSERT_BATCH]
            vectors.upsert(ns, [_record(s, vecs[s.content_hash], src.name, target, now) for s in batch])
        deletes = [] if reindex else plan.deletes
        if deletes:
            vectors.delete(ns, deletes)
        if reindex:
            _verify(vectors.list_hashes(ns), {s.id: s.content_hash for s in upserts}, ns)

        new_state = replace(
            state,
            normalizer_version=v.normalizer,
            chunker_version=v.chunker,
            embed_model=v.model,
            embed_dims=v.dims,
            active_version=target,
            retired_namespaces=sorted({*state.retired_namespaces, active_ns} if reindex else set(state.retired_namespaces)),
        )
        counts = _counts(
            staged, plan, embedded=embedded, deleted=len(deletes), orphans=orphans, reindex=reindex
        )
        events = _events(staged, plan)
        store.commit(
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
        _drop_retired(ctx)
    report = IndexReport(src.name, ns, counts, staged.reindex_reason, time.time() - started)
    report.counts["seconds"] = round(report.seconds + _upstream_seconds(staged), 3)
    return report


def _clean_up_crashed_writes(ctx: SourceContext, active_ns: str, target_ns: str, keep: set[str]) -> int:
    """Delete what a crashed run wrote that the manifest does not know and this run won't
    rewrite. Returns how many records were removed."""
    src, store, vectors = ctx.source, ctx.store, ctx.vectors
    pending = store.pending(src.name)
    if not pending:
        return 0
    manifest_ids = set(store.manifest_hashes(src.name)) if active_ns in pending else set()
    removed = 0
    for ns, ids in pending.items():
        if ns == active_ns:
            stale = sorted(ids - manifest_ids - keep)
        elif ns == target_ns:
            stale = sorted(ids - keep)
        else:  # an abandoned re-index
            vectors.drop_namespace(ns)
            removed += len(ids)
            continue
        if stale:
            vectors.delete(ns, stale)
            removed += len(stale)
    return removed


def _vectors_for(ctx: SourceContext, sections: Sequence[Section]) -> tuple[dict[str, np.ndarray], int]:
    """Vectors by content hash: from the cache, else embedded (and cached batch by batch,
    so a crash loses at most one batch of paid work). Returns (vectors, texts embedded)."""
    v, store = ctx.versions, ctx.store
    wanted = {s.content_hash: s.embed_text for s in sections}
    vecs = store.cached_vectors(v.model, v.dims, wanted.keys())
    missing = [h for h in wanted if h not in vecs]
    batch = ctx.settings.embedder.batch_size
    for i in range(0, len(missing), batch):
        hashes = missing[i : i + batch]
        rows = ctx.embedder.embed([wanted[h] for h in hashes])
        fresh = {h: np.asarray(rows[j], dtype=np.float32) for j, h in enumerate(hashes)}
        store.put_vectors(v.model, v.dims, fresh)
        vecs.update(fresh)
    return vecs, len(missing)


def _record(s: Section, vec: np.ndarray, source: str, version: int, now: float) -> VectorRecord:
    return VectorRecord(
        id=s.id,
        vector=vec.tolist(),
        metadata={
            "url": s.url,
            "key": s.key,
            "heading_path": s.heading,
            "content_hash": s.content_hash,
            "text": s.text,
            "source": source,
            "chunk_index": s.chunk_index,
            "fetched_at": now,
            "index_version": version,
        },
    )


def _verify(held: dict[str, str], expected: dict[str, str], ns: str) -> None:
    missing = expected.keys() - held.keys()
    extra = held.keys() - expected.keys()
    wrong = [i for i in expected.keys() & held.keys() if held[i] != expected[i]]
    if missing or extra or wrong:
        raise DriftError(
            f"{ns}: after writing, the store holds {len(missing)} missing, {len(extra)} extra "
            f"and {len(wrong)} mismatched records; the active index is unchanged"
        )


def _drop_retired(ctx: SourceContext) -> None:
    state = ctx.store.source_state(ctx.name)
    if state and state.retired_namespaces:
        for ns in state.retired_namespaces:
            ctx.vectors.drop_namespace(ns)
        state.retired_namespaces = []
        ctx.store.save_source_state(state)


def _events(staged: StagedPlan, plan: Plan) -> list[ChangeEvent]:
    touched: dict[str, list[Section]] = {}
    for s in plan.upserts:
        touched.setdefault(s.url, []).append(s)
    events = []
    for url in sorted(set(touched) | staged.removed_urls):
        if url in staged.sections.gone:
            continue
        kind = "changed" if url in staged.previous_urls else "new"
        secs = touched.get(url, [])
        page_hash = secs[0].content_hash if len(secs) == 1 else None
        events.append(ChangeEvent(url, kind, page_hash, tuple(sorted({s.key for s in secs}))))
    for url in sorted(staged.sections.gone):
        events.append(ChangeEvent(url, "gone", None, ()))
    return events


def _counts(
    staged: StagedPlan, plan: Plan, *, embedded: int, deleted: int, orphans: int, reindex: bool
) -> dict[str, int]:
    crawl = staged.sections.crawl
    events = _events(staged, plan)
    kinds = [e.kind for e in events]
    new, changed, gone = kinds.count("new"), kinds.count("changed"), kinds.count("gone")
    crawled = crawl.crawled if crawl else 0
    errors = len(crawl.errors) if crawl else 0
    upserts = len(plan.upserts)
    kept = 0 if reindex else staged.counts.get("unchanged", 0)
    return {
        "crawled": crawled,
        "new": new,
        "changed": changed,
        "unchanged": max(0, crawled - new - changed - gone - errors),
        "gone": gone,
        "errors": errors,
        "flagged": len(crawl.flagged) if crawl else 0,
        "embedded": embedded,
        "upserted": upserts,
        "deleted": deleted,
        "reused": kept + upserts - embedded,
        "orphans_removed": orphans,
        "sections_new": len(plan.new),
        "sections_changed": len(plan.changed),
        "sections_moved": len(plan.moved),
        "sections_removed": len(plan.removed),
        "sections_fuzzy_unchanged": len(staged.plan.fuzzy),
        "sections_indexed": upserts if reindex else staged.indexed_before
        - len(set(plan.deletes))
        + len({s.id for s in plan.upserts} - staged.previous_ids),
    }


def _upstream_seconds(staged: StagedPlan) -> float:
    crawl = staged.sections.crawl
    return staged.seconds + staged.sections.seconds + (crawl.seconds if crawl else 0.0)
