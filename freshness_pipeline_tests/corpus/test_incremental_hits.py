"""An index refreshed revision by revision holds the live site and answers exactly as a
fresh index of the same records: for every benchmark question (`questions.py`), the same
hits in each search mode (vector, full-text, hybrid), read as `freshness search` reads
them. Deletes, rewrites and payload updates along the way must leave no trace in either
part of the search.

Its records are a fresh index's of the last revision where a section fits in one chunk; a
long section keeps the chunks it was indexed with that still stand (`core/pieces.py`), so
its boundaries can differ from a fresh cut's, over the same text."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.questions import Question, questions
from freshness_pipeline.adapters.embedders import make_embedder
from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.config import load_settings
from freshness_pipeline.core.versions import namespace
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.search import MODES, ranked
from freshness_pipeline_tests.pipeline.driver import Freshness

from .corpora import build_noise, first_seen, load_revisions

pytestmark = pytest.mark.corpus
SETTINGS = {"noise": {"fuzzy_threshold": 0}, "checks": {"spike_min_share": 1.0}}  # as the replay: exact


def hits(fr: Freshness, qs: list[Question], *, rebuilt: bool = False) -> dict[str, list[list[str]]]:
    """Each question's top 10 ids per mode in `fr`'s index, or (`rebuilt`) in a namespace
    written at once with the same records, their retrieval texts embedded anew."""
    settings = load_settings(fr.sources)
    embedder = make_embedder(settings.embedder)
    vectors = embedder.embed([q.text for q in qs])
    ctx = SourceContext.open(settings, fr.name, read_only=not rebuilt)
    try:
        state = ctx.store.sources.get(fr.name)
        assert state is not None
        ns = namespace(fr.name, state.active_version)
        if rebuilt:
            records = list(ctx.vectors.records(ns, committed=True))
            texts = embedder.embed([r["retrieval_text"] for r in records])
            ns = f"{ns}-rebuilt"
            ctx.vectors.upsert(ns, [VectorRecord(r.pop("id"), v, r) for r, v in zip(records, texts, strict=True)])
            ctx.vectors.mark_committed(ns)
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


def test_an_incrementally_refreshed_index_answers_as_a_fresh_index_of_its_records(
    corpora: Path, dagster_home: Path
) -> None:
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
    inc, fresh = held(incremental), held(full)
    assert {r["key"] for r in incremental.dump()} == {r["key"] for r in full.dump()}
    whole = {i for i in fresh if i.endswith(":0")}  # sections in one chunk
    assert len(whole) > 100 and {i: inc.get(i) for i in whole} == {i: fresh[i] for i in whole}
    assert inc != fresh, "no long section was edited along the way: the replay proves less than it says"
    qs = questions(incremental.dump())
    assert len({q.kind for q in qs}) == 2 and len(qs) > 100, len(qs)
    got, want = hits(incremental, qs), hits(incremental, qs, rebuilt=True)
    for mode in MODES:
        differ = [(q.text, a, b) for q, a, b in zip(qs, got[mode], want[mode], strict=True) if a != b]
        assert not differ, f"{mode}: {len(differ)} of {len(qs)} questions differ, e.g. {differ[:2]}"
