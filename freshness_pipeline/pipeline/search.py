"""Reading the index: search and citation resolution.

A search is hybrid: the query's vector (cosine similarity) and its words (the store's
full-text part: LanceDB's BM25 index, Pinecone's sparse values) each rank the records of
the namespace, and the two lists are fused by reciprocal rank (`core/fusion.py`). Exact
identifiers, option names and status codes, which a dense vector of a long section does
not single out, are found by their words; paraphrases by the vector. Golden sets and
their miss counters (`golden.py`) rank with the same function (`ranked`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from ..adapters.damage import REPAIR_INDEX, DamagedState
from ..adapters.embedders import make_embedder
from ..adapters.state.store import StateStore
from ..adapters.vectorstores.base import Hit, VectorStore
from ..config import Settings, state_url
from ..core import embedding_models
from ..core.fusion import fuse
from ..core.state import SourceState
from ..core.versions import namespace
from .context import SourceContext, versions_for

log = logging.getLogger(__name__)

Mode = Literal["hybrid", "vector", "text"]
MODES: tuple[Mode, ...] = ("hybrid", "vector", "text")
CANDIDATES = 30  # records each part ranks before fusion (at least k)
_TIES = 10  # records read past the cut, so that ties across it are settled by id
_MOST = 10_000  # the most records a part reads (Pinecone's top_k limit), however long a tie


@dataclass(frozen=True, slots=True)
class Ranked:
    """One record found by a search of one namespace, and which part found it."""

    hit: Hit  # score: its cosine similarity to the query; text_score: its full-text score
    order: float  # what results are sorted by: the fused score (hybrid), cosine (vector), BM25 (text)
    vector_rank: int | None  # its rank in the vector part's list, from 1; None: not in it
    text_rank: int | None  # the same in the full-text part's list

    def explain(self) -> str:
        """Which part found it, at which rank, e.g. `vector #3 (cosine 0.512) + text #1 (bm25 7.20)`."""
        parts = []
        if self.vector_rank is not None:
            parts.append(f"vector #{self.vector_rank} (cosine {self.hit.score:.3f})")
        if self.text_rank is not None:
            parts.append(f"text #{self.text_rank} (bm25 {self.hit.text_score or 0.0:.2f})")
        return " + ".join(parts)


def ranked(
    vectors: VectorStore,
    ns: str,
    query: str,
    vector: list[float],
    k: int,
    *,
    mode: Mode = "hybrid",
    committed: bool = False,
) -> list[Ranked]:
    """The top-k records of `ns` for `query` (its embedding: `vector`): by cosine
    similarity, by full-text score, or both fused by reciprocal rank (the default). Each
    part ranks `CANDIDATES` records (at least k) before the fusion."""
    depth = k if mode != "hybrid" else max(k, CANDIDATES)
    limit = depth + _TIES
    while True:  # read further while a tie at the cut may run past what was read
        if mode == "vector":
            dense, words = vectors.query(ns, vector, limit, committed=committed), []
        elif mode == "text":
            dense, words = [], vectors.text_query(ns, query, vector, limit, committed=committed)
        else:
            dense, words = vectors.hybrid_query(ns, vector, query, limit, committed=committed)
        if limit >= _MOST or not (
            _tied_past(dense, depth, limit, text=False) or _tied_past(words, depth, limit, text=True)
        ):
            break
        limit = min(limit * 2, _MOST)
    dense, words = _settled(dense, depth, text=False), _settled(words, depth, text=True)
    if mode == "vector":
        return [Ranked(h, h.score, i, None) for i, h in enumerate(dense, 1)]
    if mode == "text":
        return [Ranked(h, h.text_score or 0.0, None, i) for i, h in enumerate(words, 1)]
    text_scores = {h.id: h.text_score for h in words}
    by_id = {h.id: h for h in words} | {h.id: replace(h, text_score=text_scores.get(h.id)) for h in dense}
    fused = fuse([[h.id for h in dense], [h.id for h in words]])[:k]
    return [Ranked(by_id[f.id], f.score, f.ranks[0], f.ranks[1]) for f in fused]


def _score(hit: Hit, *, text: bool) -> float:
    return round((hit.text_score or 0.0) if text else hit.score, 6)


def _settled(hits: list[Hit], depth: int, *, text: bool) -> list[Hit]:
    """The first `depth` hits, equal scores ordered by id: a store returns ties in the order
    its rows are stored, which differs between an index refreshed run by run and a fresh one
    of the same records (the same text in two sections, a BM25 tie, the hashing embedder's
    sparse vectors)."""
    return sorted(hits, key=lambda h: (-_score(h, text=text), h.id))[:depth]


def _tied_past(hits: list[Hit], depth: int, limit: int, *, text: bool) -> bool:
    """Whether the store may hold more records tied with the one at the cut than it
    returned: it filled the limit, and its last hit scores as the `depth`-th does. Which of
    those it returns is its own choice, and `_settled` must see them all."""
    if len(hits) < limit or len(hits) <= depth:
        return False
    scores = sorted(_score(h, text=text) for h in hits)
    return scores[0] == scores[-depth]


@dataclass(frozen=True, slots=True)
class Result:
    source: str
    id: str
    key: str
    url: str
    heading_path: str
    score: float  # cosine similarity of the query and the section (whichever part found it)
    text: str  # the section's markdown, links kept
    start: int | None = None  # character offsets of `text` within the page's normalized
    end: int | None = None  # text (pages.markdown); None when the live page no longer has it
    as_of: str | None = None  # the page's declared date when the text last changed, else the
    #                           month it was first seen: what an answer can say "as of"
    title: str | None = None
    explain: str | None = None  # with `explain`: which part of the search found it (`Ranked.explain`)

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
        if state is not None and state.generation > 0:  # a first run's writes before its commit: none
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
    settings: Settings,
    query: str,
    *,
    k: int = 5,
    source: str | None = None,
    record: bool = True,
    mode: Mode = "hybrid",
    explain: bool = False,
) -> list[Result]:
    """Top-k sections, hybrid by default (`ranked`; `mode` "vector" or "text" uses one part
    alone); across sources by the fused score. With `explain`, each result says which part
    found it. With `record`, the returned keys are kept for the citation resolution rate and
    a weak best match (the best cosine similarity among them) is logged (query, score, URL,
    time). An unknown `source` is a ConfigError; an index with nothing in it returns no
    results and records nothing (there is no match to be weak)."""
    if not query.strip():
        raise ValueError("an empty query has no meaning to match; say what to search for")
    chosen = [settings.source(source)] if source else settings.sources
    embedder = make_embedder(settings.embedder)
    configured = embedder.embed([query])[0].tolist()
    results: list[tuple[float, Result]] = []
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
            found = _committed_hits(ctx, state, query, vector, k, mode)
            results += [(f.order, r) for f, r in zip(found, _results(ctx, found, explain=explain), strict=True)]
        finally:
            ctx.close()
    top = [r for _, r in sorted(results, key=lambda o: (-o[0], -o[1].score))[:k]]
    if record and top:
        _record(settings, query, top, embedder.model)
    return top


def _results(ctx: SourceContext, found: list[Ranked], *, explain: bool) -> list[Result]:
    """The records as results: their offsets within the live page's text, and with `explain`
    which part found them."""
    pages = ctx.store.pages.markdown(ctx.name, {f.hit.metadata["url"] for f in found})
    out = []
    for f in found:
        h, m = f.hit, f.hit.metadata
        text = m.get("text", "")
        at = pages.get(m["url"], "").find(text) if text else -1
        span = (at, at + len(text)) if at >= 0 else (None, None)
        out.append(
            Result(
                ctx.name,
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
                explain=f.explain() if explain else None,
            )
        )
    return out


def _committed_hits(
    ctx: SourceContext, state: SourceState, query: str, vector: list[float], k: int, mode: Mode
) -> list[Ranked]:
    """The active namespace as of its last commit (never half of a running refresh's writes).
    Nothing found where the manifest lists records is a lost vector store, said so (the
    full-text part alone finds nothing for words no record has)."""
    ns = namespace(ctx.name, state.active_version)
    hits = ranked(ctx.vectors, ns, query, vector, k, mode=mode, committed=True)
    if not hits and mode != "text" and (n := ctx.store.manifest.count(ctx.name)):
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
    best = max(top, key=lambda r: r.score)  # fused order is not cosine order
    weak = None
    if threshold is not None and best.score < threshold:
        weak = {"query": query, "model": model, "best_score": best.score, "best_url": best.url, "source": best.source}
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
