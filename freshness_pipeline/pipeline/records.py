"""Vector records from manifest sections: their vectors (embedding cache first), their
payload, and putting the active namespace back to what the manifest says. Shared by the
commit protocol (`indexing.py`) and `reconcile.py`."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .. import progress
from ..adapters.vectorstores.base import VectorRecord
from ..core.models import Section
from ..core.retrieval import retrieval_text
from ..core.state import SourceState
from ..core.versions import namespace
from .context import SourceContext
from .faults import crash_point

if TYPE_CHECKING:
    import numpy as np


class UncachedVectorsError(RuntimeError):
    """Vectors wanted for another model than the configured embedder's are not in the
    embedding cache: nothing can make them."""


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
        ctx.vectors.upsert(
            ns, [record(_live(s), vecs[s.content_hash], ctx.name, state.active_version, now) for s in part]
        )
    return len(gone), len(rows)


def _live(s: Section) -> Section:
    """A manifest section as its record reads: its retrieval text made from the text it
    shows (a forgiven edit's manifest row keeps the retrieval text that was embedded)."""
    return replace(s, embed_text=retrieval_text(s.heading_path, s.text))


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
        vecs.update(_embed(ctx, {h: wanted[h] for h in hashes}))
    return vecs, len(missing)


def embed_uncached(ctx: SourceContext, batches: Iterable[Sequence[Section]], *, total: int | None) -> int:
    """Embed (and cache) every retrieval text of `batches` that the configured embedder's
    cache lacks, in the embedder's batches, counted as one stage of at most `total`
    sections. Returns the number of texts embedded."""
    v, size = ctx.versions, ctx.settings.embedder.batch_size

    def todo() -> Iterator[dict[str, str]]:
        for part in batches:
            wanted = {s.content_hash: s.embed_text for s in part}
            cached = ctx.store.vector_cache.get(v.model, v.dims, wanted.keys())
            missing = [h for h in wanted if h not in cached]
            for i in range(0, len(missing), size):
                yield {h: wanted[h] for h in missing[i : i + size]}

    embedded = 0
    for texts in progress.track(todo(), "embed", total=total, unit="sections", count=len):
        _embed(ctx, texts)
        embedded += len(texts)
    return embedded


def _embed(ctx: SourceContext, texts: dict[str, str]) -> dict[str, np.ndarray]:
    """Embed one batch (content hash -> retrieval text) and cache it at once: a crash
    loses at most this batch of paid work."""
    import numpy as np  # here: a quiet run, which embeds nothing, never loads it

    rows = ctx.embedder.embed(list(texts.values()))
    fresh = {h: np.asarray(rows[j], dtype=np.float32) for j, h in enumerate(texts)}
    ctx.store.vector_cache.put(ctx.versions.model, ctx.versions.dims, fresh)
    crash_point("embed")
    return fresh


def record(s: Section, vec: np.ndarray, source: str, version: int, now: float) -> VectorRecord:
    return VectorRecord(
        id=s.id, vector=vec, metadata=metadata(s, source, version, now)
    )  # float32, not 384 Python floats


def metadata(s: Section, source: str, version: int, now: float) -> dict[str, object]:
    """A record's payload: what a reader (or an answering model) sees with a hit."""
    return {
        "url": s.url,
        "key": s.key,
        "heading_path": s.heading,
        "content_hash": s.content_hash,
        "text": s.text,  # markdown, links kept
        "retrieval_text": s.embed_text,  # the words of `text`: the full-text part of a search reads it
        "title": s.title,
        "as_of": s.as_of,
        "source": source,
        "chunk_index": s.chunk_index,
        "fetched_at": now,
        "index_version": version,
    }
