"""Replaying a real docs history: the oracle, what the index must hold for one revision
(the revisions and the build noise are in `bench/corpora.py`, which the benchmarks share).

The oracle renders each page *without* noise and runs the project's own text core on it
(extract -> normalize -> segment): the pipeline, fed the noisy pages, must end up with
exactly these sections. What changed between two revisions is computed here, from the
oracles' (id -> content hash) maps, never from the pipeline's plan. Sharing the text core
with the pipeline, the oracle cannot catch that core's own mistakes (see test_replay.py).

`NearEmptyHolds` models the one rule that keeps a page's old sections: a page that had
text and turned near-empty (a real revision may cut a page to a stub) is held at first
sight, and taken by the next run that sees the same clean text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from bench.corpora import CORPORA, TIPS, Revision, build_noise, clean_page, first_seen, load_revisions
from freshness_pipeline.config import ChunkPolicy
from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.models import Section
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.responses import turned_near_empty
from freshness_pipeline.core.segment import segment
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.demo.render import page_path
from freshness_pipeline.demo.server import DocsSite

__all__ = ["CORPORA", "TIPS", "Revision", "build_noise", "first_seen", "load_revisions"]
__all__ += ["Diff", "NearEmptyHolds", "clean_texts", "expected_diff", "oracle", "served_texts"]


def oracle(base_url: str, docs: Mapping[str, str], dates: Mapping[str, str]) -> dict[str, Section]:
    """id -> section of every section the index must hold for `docs`, from clean pages."""
    out: dict[str, Section] = {}
    for rel, text in docs.items():
        url = normalize_url(base_url + page_path(rel))
        for s in _page_oracle(url, rel, text, dates[rel]):
            assert s.id not in out, f"oracle: two sections with id {s.id} ({url} {s.heading})"
            out[s.id] = s
    return out


def clean_texts(base_url: str, docs: Mapping[str, str], dates: Mapping[str, str]) -> dict[str, str]:
    """url -> the normalized text of each page rendered without noise."""
    return {
        (url := normalize_url(base_url + page_path(rel))): _clean_text(url, rel, text, dates[rel])
        for rel, text in docs.items()
    }


def served_texts(site: DocsSite, docs: Mapping[str, str]) -> dict[str, str]:
    """url -> the normalized text the pipeline extracts from each page `site` serves now."""
    out = {}
    for rel in docs:
        url, html = normalize_url(site.base_url + page_path(rel)), site.page(page_path(rel))
        assert html is not None, f"the site serves no {page_path(rel)}"
        out[url] = normalize(extract(html.decode(), url).markdown, url=url)
    return out


@lru_cache(maxsize=1024)
def _clean_text(url: str, rel: str, text: str, date: str) -> str:
    return normalize(extract(clean_page(rel, text, date), url).markdown, url=url)


@lru_cache(maxsize=1024)
def _page_oracle(url: str, rel: str, text: str, date: str) -> tuple[Section, ...]:
    """One clean page's sections; cached, as most pages are the same from one revision to the
    next (the text core is a pure function of these arguments)."""
    chunking = ChunkPolicy()
    markdown = _clean_text(url, rel, text, date)
    return tuple(segment(url, markdown, page_date=date, budget=chunking.token_budget, encoding=chunking.encoding))


@dataclass
class NearEmptyHolds:
    """Which pages a run holds as near-empty, run after run. Whether a page turned near-empty
    is judged, as the pipeline judges it, on the text it was served (`served`: noise and
    all, so the same length) against the served text of its last indexed version; whether
    a second run sees the same text, on the clean text (what its sections are cut from)."""

    min_chars: int = 200  # `fetch.soft_404_min_chars`
    had: dict[str, int] = field(default_factory=dict)  # url -> length of the text its sections hold
    held: dict[str, str] = field(default_factory=dict)  # url -> the clean text held by the last run

    def run(
        self,
        before: Mapping[str, Section],
        truth: Mapping[str, Section],
        served: Mapping[str, str],
        clean: Mapping[str, str],
    ) -> dict[str, Section]:
        """What the index holds after a run on this revision: `truth`, but the pages this run
        holds keep their sections of `before`."""
        self.held = {
            url: clean[url]
            for url, text in served.items()
            if turned_near_empty(text, min_chars=self.min_chars, had_chars=self.had.get(url))
            and self.held.get(url) != clean[url]
        }
        self.had = {url: self.had[url] if url in self.held else len(text) for url, text in served.items()}
        kept = {i: s for i, s in before.items() if s.url in self.held}
        return {i: s for i, s in truth.items() if s.url not in self.held} | kept


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
