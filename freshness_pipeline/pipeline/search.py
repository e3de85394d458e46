"""Reading the index: search and citation resolution."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..adapters.embedders import make_embedder
from ..config import Settings
from .context import SourceContext, namespace


@dataclass(frozen=True, slots=True)
class Result:
    source: str
    id: str
    key: str
    url: str
    heading_path: str
    score: float  # cosine similarity of the query and the section
    text: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def search(settings: Settings, query: str, *, k: int = 5, source: str | None = None) -> list[Result]:
    embedder = make_embedder(settings.embedder)
    vector = embedder.embed([query])[0].tolist()
    results: list[Result] = []
    for s in settings.sources:
        if source and s.name != source:
            continue
        ctx = SourceContext.open(settings, s.name)
        try:
            state = ctx.store.source_state(s.name)
            if state is None or state.generation == 0:
                continue
            for h in ctx.vectors.query(namespace(s.name, state.active_version), vector, k):
                m = h.metadata
                results.append(
                    Result(s.name, h.id, m["key"], m["url"], m["heading_path"], h.score, m.get("text", ""))
                )
        finally:
            ctx.close()
    return sorted(results, key=lambda r: -r.score)[:k]


def resolve(settings: Settings, key: str, *, source: str | None = None) -> dict[str, Any] | None:
    """Follow key redirects (renamed headings, moved pages) to the section's current text."""
    for s in settings.sources:
        if source and s.name != source:
            continue
        ctx = SourceContext.open(settings, s.name)
        try:
            current, hops = ctx.store.resolve_key(s.name, key)
            chunks = ctx.store.section_by_key(s.name, current)
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
