"""An index refreshed revision by revision answers exactly as a fresh index of the last
revision: the same records (retrieval texts included) and, for every benchmark question
(`questions.py`), the same hits in each search mode (vector, full-text, hybrid), read as
`freshness search` reads them. Deletes, rewrites and payload updates along the way must
leave no trace in either part of the search."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.questions import Question, questions
from freshness_pipeline.adapters.embedders import make_embedder
from freshness_pipeline.config import load_settings
from freshness_pipeline.core.versions import namespace
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.search import MODES, ranked
from freshness_pipeline_tests.pipeline.driver import Freshness

from .corpora import build_noise, first_seen, load_revisions

pytestmark = pytest.mark.corpus
SETTINGS = {"noise": {"fuzzy_threshold": 0}, "checks": {"spike_min_share": 1.0}}  # as the replay: exact


def hits(fr: Freshness, qs: list[Question]) -> dict[str, list[list[str]]]:
    settings = load_settings(fr.sources)
    vectors = make_embedder(settings.embedder).embed([q.text for q in qs])
    ctx = SourceContext.open(settings, fr.name, read_only=True)
    try:
        state = ctx.store.sources.get(fr.name)
        assert state is not None
        ns = namespace(fr.name, state.active_version)
        return {
            mode: [
                [f.hit.id for f in ranked(ctx.vectors, ns, q.text, v.tolist(), 10, mode=mode, committed=True)]
                for q, v in zip(qs, vectors, strict=True)
            ]
            for mode in MODES
        }
    finally:
        ctx.close()


def held(fr: Freshness) -> dict[str, tuple[str, str, str]]:
    return {r["id"]: (r["content_hash"], r["text"], r["retrieval_text"]) for r in fr.dump()}


def test_an_incrementally_refreshed_index_gives_a_fresh_full_indexs_hits(corpora: Path, dagster_home: Path) -> None:
    revisions = load_revisions(corpora / "httpx")
    dates = first_seen(revisions)
    with DocsSite() as site:
        # One state home, two sources (their own namespaces) on the same site: the same keys.
        incremental = Freshness(
            dagster_home / "incremental.yaml", site.sitemap_url, name="inc", source_settings=SETTINGS
        )
        full = Freshness(dagster_home / "full.yaml", site.sitemap_url, name="full", source_settings=dict(SETTINGS))
        for rev in (revisions[0], revisions[4], revisions[-1]):
            site.publish(rev.docs, noise=build_noise(rev.number + 1, dates))
            counts = incremental.run()
        assert counts["deleted"] > 0 and counts["upserted"] > 0, counts  # the last step rewrote and removed
        full.run()
    assert held(incremental) == held(full)
    qs = questions(full.dump())
    assert len({q.kind for q in qs}) == 2 and len(qs) > 100, len(qs)
    got, want = hits(incremental, qs), hits(full, qs)
    for mode in MODES:
        differ = [(q.text, a, b) for q, a, b in zip(qs, got[mode], want[mode], strict=True) if a != b]
        assert not differ, f"{mode}: {len(differ)} of {len(qs)} questions differ, e.g. {differ[:2]}"
