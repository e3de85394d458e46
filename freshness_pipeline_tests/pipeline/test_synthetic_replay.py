"""Replay a generated site history through `freshness run`, against an oracle that knows
only the generator's model of each revision (sitegen.history): no extraction, no
segmentation, no plan of the project's own. Every kind of edit a real docs site makes
happens (sections inserted and removed, headings renamed, pages moved, added and dropped,
link-only and date-only edits, rewrites), each under fresh build noise; after each run the
index holds exactly the site's sections, the run wrote, deleted and embedded exactly what
the oracle says, and a rebuild with new noise alone (a quiet week) costs nothing.

This is what proves the planner in a clone without the shared corpora (corpus/).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.demo.render import page_path
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import EDITS, Doc, Part, Revision, history

Key = tuple[str, str]  # (page URL, heading path)
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)[^)]*\)")


def identity(doc: Doc, part: Part) -> tuple[str, ...]:
    """What the embedder is paid for (docs/change-detection.md): the heading path and the
    section's words. Link targets and dates are payload: a link-only or date-only edit
    embeds nothing, a renamed heading is embedded once."""
    return doc.title, part.heading, part.meaning()


def expected(base_url: str, rev: Revision) -> dict[Key, tuple[Part, tuple[str, ...]]]:
    out: dict[Key, tuple[Part, tuple[str, ...]]] = {}
    for rel, doc in rev.docs.items():
        url = normalize_url(base_url + page_path(rel))
        for part in doc.parts:
            out[(url, f"{doc.title} > {part.heading}")] = (part, identity(doc, part))
    return out


def noise(build: int, dates: Mapping[str, str]) -> Callable[[str], dict[str, str]]:
    """A build's chrome: a "Last updated" time and a build stamp; the pages' declared dates."""
    rng = random.Random(build)
    by_path = {page_path(rel): d for rel, d in dates.items()}
    stamp = f"#{5000 + build} {rng.getrandbits(32):08x}"
    return lambda path: {"updated": f"{rng.randrange(2, 30)} days ago", "build": stamp, "date": by_path[path]}


Want = dict[Key, tuple[Part, tuple[str, ...]]]  # each section: its part and what embedding it costs


def assert_index_is(base_url: str, records: list[dict], want: Want, step: str) -> None:
    got = {(r["url"], r["heading_path"]): r["text"] for r in records}
    assert len(got) == len(records), f"{step}: two records for one section"
    assert got.keys() == want.keys(), (
        f"{step}: orphans {sorted(got.keys() - want.keys())[:3]}, missing {sorted(want.keys() - got.keys())[:3]}"
    )
    for key, text in got.items():
        part = want[key][0]
        words = " ".join(_LINK.sub(r"\1", text).split())
        assert words == part.meaning(), f"{step}: {key} holds {words[:80]!r}, the site says {part.meaning()[:80]!r}"
        targets = [m.group(2) for m in _LINK.finditer(text)]
        assert targets == ([base_url + part.link[1]] if part.link else []), f"{step}: {key} links {targets}"


def test_a_generated_history_embeds_exactly_the_new_words(dagster_home: Path) -> None:
    revisions = history(n_pages=8, steps=6, seed=7)
    assert {kind for r in revisions for kind, _ in r.edits} == set(EDITS)
    seen: set[tuple[str, ...]] = set()
    before: dict[Key, tuple[Part, tuple[str, ...]]] = {}
    with DocsSite() as site:
        settings = {"noise": {"fuzzy_threshold": 0}, "checks": {"spike_min_share": 1.0}}
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url, source_settings=settings)
        for rev in revisions:
            step = f"r{rev.number} {rev.edits}"
            site.publish(rev.markdown(), noise=noise(2 * rev.number, rev.dates()))
            counts = fr.run()
            want = expected(site.base_url, rev)
            written = [k for k, (_, ident) in want.items() if k not in before or before[k][1] != ident]
            new_texts = {ident for _, ident in want.values()} - seen
            got = (counts["upserted"], counts["deleted"], counts["embedded"])
            assert got == (len(written), len(before.keys() - want.keys()), len(new_texts)), f"{step}: {counts}"
            assert counts["errors"] == counts["flagged"] == 0, f"{step}: {counts}"
            assert_index_is(site.base_url, fr.dump(), want, step)
            assert fr.status()["sections_indexed"] == len(want), step
            if rev.number % 3 == 0:  # a rebuild with new noise alone: nothing to pay for
                site.publish(rev.markdown(), noise=noise(2 * rev.number + 1, rev.dates()))
                quiet = fr.run()
                assert (quiet["upserted"], quiet["deleted"], quiet["embedded"]) == (0, 0, 0), f"{step} quiet: {quiet}"
            seen |= {ident for _, ident in want.values()}
            before = want
