"""Replay the real docs histories of httpx, Starlette (mkdocs), Flask (Sphinx HTML) and
WebdriverIO (Docusaurus HTML) through `freshness run`.

For each revision r0 -> r9, served with fresh build noise: the run writes exactly the
sections whose normalized text changed since the previous revision, embeds only texts it
never indexed before (moves and renames reuse vectors), deletes exactly the sections
that are gone, and `freshness dump` equals the live site. Then the same revision is
served again with new noise (a quiet week): nothing is embedded, written or deleted,
but for a page that turned near-empty (Flask r7 cuts one to a stub): held and flagged at
first sight (its old sections kept, `corpora.NearEmptyHolds`), it is taken by this second
run, which sees the same text. The replay runs with the quarantine at its defaults: no
other page of the three histories is held (Flask r7's one other page rewritten unlike
its own is taken at once: too few for the `rewritten` share).

The replay runs with `fuzzy_threshold: 0`: the oracle is exact, so every changed text must
be re-embedded; what the fuzzy rule forgives is tested in pipeline/test_fuzzy.py.

What it proves, and what it does not. The oracle (`corpora.oracle`) is the production text
core (extract -> normalize -> segment) run on each page rendered without noise, and the
expected counts are differences of the oracle's (id -> content hash) maps. So the replay
proves that everything *around* the text core is exact on real histories: build noise is
removed (`assert_noise_reaches_extraction` shows it reached extraction), conditional
fetches, template learning, page signatures, the planner, the commit protocol and the
embedding cache together leave the index holding exactly the core's sections of the clean
pages, writing, deleting and embedding no more than those sections changed. It does not
prove that the core's sections are right for the markdown: a bug in extraction,
normalization or segmentation (a lost paragraph, a wrong heading path, a rule stripping
real text) is in the oracle as well and goes unseen here; `core/test_extract.py`,
`test_noise.py` and `test_segment.py` check those against hand-written expectations.
Likewise, which page turned near-empty is judged by the core's own rule
(`responses.turned_near_empty`): the replay proves that the hold is carried out exactly
(old sections kept and nothing of the stub written at first sight, the stub taken by the
next run), not that the rule is right (`core/test_responses.py` checks that).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.models import Section
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness

from .corpora import (
    CORPORA,
    TIPS,
    Diff,
    NearEmptyHolds,
    build_noise,
    clean_texts,
    expected_diff,
    first_seen,
    load_revisions,
    oracle,
    served_texts,
)

pytestmark = pytest.mark.corpus


def assert_index_is(records: list[dict], truth: Mapping[str, Section], step: str) -> None:
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), f"{step}: duplicate records in the index"
    got = {r["id"]: (r["key"], r["url"], r["heading_path"], r["content_hash"], r["text"]) for r in records}
    want = {i: (s.key, s.url, s.heading, s.content_hash, s.text) for i, s in truth.items()}
    orphans, missing = sorted(got.keys() - want.keys()), sorted(want.keys() - got.keys())
    stale = sorted(i for i in got.keys() & want.keys() if got[i] != want[i])
    assert not (orphans or missing or stale), (
        f"{step}: index differs from the live site: {len(orphans)} orphans {[got[i][1:3] for i in orphans[:3]]}, "
        f"{len(missing)} missing {[want[i][1:3] for i in missing[:3]]}, "
        f"{len(stale)} stale {[(got[i][1:3], got[i][4][:80], want[i][4][:80]) for i in stale[:3]]}"
    )


def assert_noise_reaches_extraction(site: DocsSite, build: int) -> None:
    """The quiet replay proves nothing unless the noise survives into the extracted text."""
    path = site.paths()[0]
    raw = extract(site.page(path).decode(), site.base_url + path).markdown
    assert TIPS[build % len(TIPS)] in raw and "Last updated" in raw, raw[:300]


@pytest.mark.timeout(1800)  # twenty runs; Flask's first indexes 600 sections of 450,000 characters
@pytest.mark.parametrize("name", CORPORA)
def test_replay_embeds_exactly_what_changed(name: str, corpora: Path, dagster_home: Path) -> None:
    revisions = load_revisions(corpora / name)
    dates = first_seen(revisions)
    build = 0
    before: dict[str, Section] = {}
    indexed_texts: set[str] = set()
    holds = NearEmptyHolds()
    with DocsSite() as site:
        fr = Freshness(
            dagster_home / "sources.yaml",
            site.sitemap_url,
            name=name,
            # The quarantine runs at its defaults (a real revision is taken within two runs);
            # the index-level spike check, which a real revision may trip, is off.
            source_settings={"noise": {"fuzzy_threshold": 0}, "checks": {"spike_min_share": 1.0}},
        )
        for rev in revisions:
            for quiet in (False, True):
                step = f"{name} r{rev.number}" + (
                    " quiet" if quiet else f" (from r{rev.number - 1})" * (rev.number > 0)
                )
                build += 1
                site.publish(rev.docs, noise=build_noise(build, dates))
                assert_noise_reaches_extraction(site, build)
                started = time.time()
                counts = fr.run()
                truth, was_held = oracle(site.base_url, rev.docs, dates), bool(holds.held)
                truth = holds.run(
                    before, truth, served_texts(site, rev.docs), clean_texts(site.base_url, rev.docs, dates)
                )
                want = expected_diff(before, truth, indexed_texts)
                if quiet and not was_held:
                    assert want == Diff(0, 0, 0), f"{step}: the oracle changed on a quiet week: {want}"
                got = (counts["upserted"], counts["deleted"], counts["embedded"])
                assert got == (want.upserted, want.deleted, want.embedded), (
                    f"{step}: (upserted, deleted, embedded) {got} != {want}"
                )
                flagged = counts.get("flagged_pages") or {}
                assert counts["errors"] == 0 and set(flagged) == set(holds.held), f"{step}: {counts}"
                assert all(why.startswith("turned near-empty") for why in flagged.values()), flagged
                assert_index_is(fr.dump(), truth, step)
                assert fr.status()["sections_indexed"] == len(truth), step
                print(f"{step}: {want}, held {sorted(holds.held)} in {time.time() - started:.1f}s")
                indexed_texts |= {s.content_hash for s in truth.values()}
                before = truth
