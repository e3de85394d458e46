"""Reading the index: search and citation resolution."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from ..adapters.damage import REPAIR_INDEX, DamagedState
from ..adapters.embedders import make_embedder
from ..adapters.state.store import StateStore
from ..adapters.vectorstores.base import Hit
from ..config import Settings, state_url
from ..core import embedding_models
from ..core.state import SourceState
from ..core.versions import namespace
from .context import SourceContext, versions_for

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Result:
    source: str
    id: str
    key: str
    url: str
    heading_path: str
    score: float  # cosine similarity of the query and the section
    text: str  # the section's markdown, links kept
    start: int | None = None  # character offsets of `text` within the page's normalized
    end: int | None = None  # text (pages.markdown); None when the live page no longer has it
    as_of: str | None = None  # the page's declared date when the text last changed, else the
    #                           month it was first seen: what an answer can say "as of"
    title: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def weak_threshold(settings: Settings) -> float | None:
    """The weak-match threshold of the configured embedding model, if it has one: the sources
    file's `weak_thresholds`, else the model's (`core/embedding_models.py`)."""
    model = versions_for(settings, settings.sources[0]).model if settings.sources else ""
    return settings.weak_thresholds.get(model, embedding_models.weak_threshold(model))


def dump(settings: Settings, source: str) -> Iterator[dict[str, Any]]:
    """Every record of `source`'s committed index, as readers see it (none before its first
    commit)."""
    ctx = SourceContext.open(settings, source, read_only=True)
    try:
        state = ctx.store.sources.get(source)
        if state is not None:
            yield from ctx.vectors.records(namespace(source, state.active_version), committed=True)
    finally:
        ctx.close()


def indexed_sources(settings: Settings, names: list[str]) -> list[str]:
    """The sources that have committed an index, read without loading any model and
    without write access."""
    store = StateStore(state_url(settings), read_only=True)
    try:
        return [n for n in names if (s := store.sources.get(n)) is not None and s.generation > 0]
    finally:
        store.close()


def search(
    settings: Settings, query: str, *, k: int = 5, source: str | None = None, record: bool = True
) -> list[Result]:
    """Top-k sections by cosine similarity. With `record`, the returned keys are kept for the
    citation resolution rate and a weak best match is logged (query, score, URL, time). An
    unknown `source` is a ConfigError; an index with nothing in it returns no results and
    records nothing (there is no match to be weak)."""
    if not query.strip():
        raise ValueError("an empty query has no meaning to match; say what to search for")
    chosen = [settings.source(source)] if source else settings.sources
    embedder = make_embedder(settings.embedder)
    configured = embedder.embed([query])[0].tolist()
    results: list[Result] = []
    for s in chosen:
        ctx = SourceContext.open(settings, s.name, read_only=True)
        try:
            state = ctx.store.sources.get(s.name)
            if state is None or state.generation == 0:
                continue
            vector = configured
            if (state.embed_model, state.embed_dims) != (embedder.model, embedder.dimensions):
                # A re-index to another model is under way: the active index still holds the old one.
                vector = _old_model_vector(settings, state, query)
            hits = _committed_hits(ctx, state, vector, k)
            pages = ctx.store.pages.markdown(s.name, {h.metadata["url"] for h in hits})
            for h in hits:
                m = h.metadata
                text = m.get("text", "")
                at = pages.get(m["url"], "").find(text) if text else -1
                span = (at, at + len(text)) if at >= 0 else (None, None)
                results.append(
                    Result(
                        s.name,
                        h.id,
                        m["key"],
                        m["url"],
                        m["heading_path"],
                        h.score,
                        text,
                        start=span[0],
                        end=span[1],
                        as_of=m.get("as_of") or None,
                        title=m.get("title") or None,
                    )
                )
        finally:
            ctx.close()
    top = sorted(results, key=lambda r: -r.score)[:k]
    if record and top:
        _record(settings, query, top, embedder.model)
    return top


def _committed_hits(ctx: SourceContext, state: SourceState, vector: list[float], k: int) -> list[Hit]:
    """The active namespace as of its last commit (never half of a running refresh's writes).
    Nothing found where the manifest lists records is a lost vector store, said so."""
    ns = namespace(ctx.name, state.active_version)
    hits = ctx.vectors.query(ns, vector, k, committed=True)
    if not hits and (n := ctx.store.manifest.count(ctx.name)):
        raise DamagedState(
            f"{ns} holds no records but the manifest lists {n} (the vector store was lost or emptied); {REPAIR_INDEX}"
        )
    return hits


def _old_model_vector(settings: Settings, state: SourceState, query: str) -> list[float]:
    """The query embedded with the model the active index was built with (same provider)."""
    cfg = settings.embedder.model_copy(update={"model": state.embed_model, "dimensions": state.embed_dims})
    if cfg.provider == "local":
        cfg = cfg.model_copy(update={"dimensions": None})
    return make_embedder(cfg).embed([query])[0].tolist()


def _record(settings: Settings, query: str, top: list[Result], model: str) -> None:
    """`top` is not empty."""
    threshold = weak_threshold(settings)
    best = top[0]
    weak = None
    if threshold is not None and best.score < threshold:
        weak = {"query": query, "model": model, "best_score": best.score, "best_url": best.url}
    try:
        store = StateStore(state_url(settings))
        try:
            store.metrics.record_search(weak=weak, cited=sorted({(r.source, r.key) for r in top}))
        finally:
            store.close()
    except DamagedState as exc:  # a read-only home still answers searches
        log.warning(f"search not recorded for the metrics: {exc}")


def resolve(settings: Settings, key: str, *, source: str | None = None) -> dict[str, Any] | None:
    """Follow key redirects (renamed headings, moved pages) to the section's current text."""
    for s in [settings.source(source)] if source else settings.sources:
        ctx = SourceContext.open(settings, s.name, read_only=True)
        try:
            current, hops = ctx.store.manifest.resolve_key(s.name, key)
            chunks = ctx.store.manifest.by_key(s.name, current)
        finally:
            ctx.close()
        if chunks:
            return {
                "source": s.name,
                "key": current,
                "redirects": hops,
                "url": chunks[0].url,
                "heading_path": chunks[0].heading,
                "text": "\n\n".join(c.text for c in chunks),
            }
    return None
