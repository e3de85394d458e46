"""Replaying a real docs history: the oracle, what the index must hold for one revision
(the revisions and the build noise are in `bench/corpora.py`, which the benchmarks share).

The oracle renders each page *without* noise and runs the project's own text core on it
(extract -> normalize -> segment): the pipeline, fed the noisy pages, must end up with
exactly these sections. What changed between two revisions is computed here, from the
oracles' (id -> content hash) maps, never from the pipeline's plan. Sharing the text core
with the pipeline, the oracle cannot catch that core's own mistakes (see test_replay.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from bench.corpora import CORPORA, TIPS, Revision, build_noise, clean_page, first_seen, load_revisions
from freshness_pipeline.config import ChunkPolicy
from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.models import Section
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.segment import segment
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.demo.render import page_path

__all__ = ["CORPORA", "TIPS", "Revision", "build_noise", "first_seen", "load_revisions"]
__all__ += ["Diff", "expected_diff", "oracle"]


def oracle(base_url: str, docs: Mapping[str, str], dates: Mapping[str, str]) -> dict[str, Section]:
    """id -> section of every section the index must hold for `docs`, from clean pages."""
    out: dict[str, Section] = {}
    for rel, text in docs.items():
        url = normalize_url(base_url + page_path(rel))
        for s in _page_oracle(url, rel, text, dates[rel]):
            assert s.id not in out, f"oracle: two sections with id {s.id} ({url} {s.heading})"
            out[s.id] = s
    return out


@lru_cache(maxsize=1024)
def _page_oracle(url: str, rel: str, text: str, date: str) -> tuple[Section, ...]:
    """One clean page's sections; cached, as most pages are the same from one revision to the
    next (the text core is a pure function of these arguments)."""
    chunking = ChunkPolicy()
    page = extract(clean_page(rel, text, date), url)
    markdown = normalize(page.markdown, url=url)
    return tuple(segment(url, markdown, page_date=date, budget=chunking.token_budget, encoding=chunking.encoding))


@dataclass(frozen=True)
class Diff:
    """What one step must write: by id, and by text (the embedding cache reuses vectors)."""

    upserted: int  # records written: new ids, and ids whose content hash changed
    deleted: int  # ids that no longer exist (removed, or moved to another key)
    embedded: int  # distinct texts never indexed before in this replay


def expected_diff(before: Mapping[str, Section], after: Mapping[str, Section], indexed_texts: set[str]) -> Diff:
    written = [s for i, s in after.items() if i not in before or before[i].content_hash != s.content_hash]
    return Diff(
        upserted=len(written),
        deleted=len(before.keys() - after.keys()),
        embedded=len({s.content_hash for s in written} - indexed_texts),
    )
