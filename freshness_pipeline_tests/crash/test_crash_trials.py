"""Seeded crash trials: SIGKILL the refresh at every step of the commit protocol and at
random embed/upsert batches, sometimes twice, sometimes with the site reverting before
the next run, sometimes during a full re-index. After one clean run the index equals the
live site, reconcile is clean, no intent or namespace is left behind, and the texts
embedded across all the runs are exactly the ones never embedded before."""

from __future__ import annotations

import copy
import random
import re
import shutil
from pathlib import Path

import lancedb
import pytest
import yaml
from sqlalchemy import func, select

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.config import load_settings
from freshness_pipeline.core.versions import namespace
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.indexing import CRASH_POINTS
from freshness_pipeline.pipeline.reconcile import reconcile
from freshness_pipeline_tests.crash.child import refresh, texts_embedded
from freshness_pipeline_tests.sitegen import Site, generate, paragraph

TRIALS = 24
KILLED = -9


LINK = "See [the reference](https://reference.test/{}) for the limits."


def texts(site: Site) -> set[tuple[str, str]]:
    """What the embedder sees of each section: heading path and words, no link targets."""
    return {(path, re.sub(r"\]\([^)]*\)", "]", t)) for _, path, t in site.expected("")}


def write_sources(path: Path, sitemap: str, *, token_budget: int = 400) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "docs", "sitemap": sitemap, "chunking": {"token_budget": token_budget}}],
                "embedder": {"provider": "hashing", "batch_size": 2},
                "vector_store": {"provider": "lancedb", "upsert_batch": 3},
            }
        )
    )
    return path


def history() -> tuple[Site, Site, dict[tuple[str, int], str]]:
    """v0 and v1 of a 10-page site, and the v0 texts that v1 edited (for reverts)."""
    v0 = generate(10, sections_per_page=3, seed=11)
    v1 = Site(copy.deepcopy(v0.pages))
    rng = random.Random(12)
    edited = {}
    for rel, i in [("guide/page1.md", 0), ("guide/page4.md", 2), ("guide/page7.md", 1)]:
        edited[(rel, i)] = v1.pages[rel][i][1]
        v1.pages[rel][i] = (v1.pages[rel][i][0], paragraph(rng))
    heading, text = v1.pages["guide/page9.md"][2]
    v1.pages["guide/page9.md"][2] = (heading, f"{text} {LINK.format('v1')}")
    return v0, v1, edited


def next_version(v1: Site, edited: dict[tuple[str, int], str], rng: random.Random) -> Site:
    """Edits, inserts, a deleted page, a renamed heading, a moved page, a new page, a
    link-target edit (a payload update) and a revert to a v0 text."""
    v2 = Site(copy.deepcopy(v1.pages))
    heading, text = v2.pages["guide/page9.md"][2]
    v2.pages["guide/page9.md"][2] = (heading, text.replace(LINK.format("v1"), LINK.format("v2")))
    pages = sorted(p for p in v2.pages if p != "guide/page9.md")
    (rel, i), old_text = rng.choice(sorted(edited.items()))
    v2.pages[rel][i] = (v2.pages[rel][i][0], old_text)  # revert: cached since v0
    for rel in rng.sample([p for p in pages if p != rel], 4):
        j = rng.randrange(3)
        v2.pages[rel][j] = (v2.pages[rel][j][0], paragraph(rng))
    for rel in rng.sample(pages, 2):
        v2.pages[rel].insert(rng.randrange(3), (f"Inserted {rng.randrange(10**6)}", paragraph(rng)))
    gone, moved, renamed = rng.sample([p for p in pages if p != rel], 3)
    del v2.pages[gone]
    v2.pages[moved.replace("guide/", "moved/")] = v2.pages.pop(moved)
    heading, text = v2.pages[renamed][0]
    v2.pages[renamed][0] = (heading + " renamed", text)
    v2.pages["guide/added.md"] = [("Added one", paragraph(rng)), ("Added two", paragraph(rng))]
    return v2


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory):
    """One DocsSite for all trials and a state folder that indexed v0 then v1."""
    v0, v1, edited = history()
    root = tmp_path_factory.mktemp("crash")
    home = root / "baseline"
    home.mkdir()
    with DocsSite() as site:
        sources = write_sources(root / "sources.yaml", site.sitemap_url)
        log = root / "baseline.log"
        for version in (v0, v1):
            site.publish(version.markdown())
            assert refresh(sources, "docs", home, embed_log=log) == 0
        assert texts_embedded(log) == len(texts(v0) | texts(v1))
        yield site, home, v0, v1, edited


def trial_plan(seed: int) -> dict:
    rng = random.Random(seed)
    reindex = rng.random() < 0.3
    reachable = [p for p in CRASH_POINTS if p not in (("delete", "payload") if reindex else ("dropped",))]
    point = reachable[seed % len(reachable)]  # every point, in turn; the rest is random
    if point in ("embed", "upsert"):
        point += f":{rng.randint(1, 4)}"
    second = rng.choice(CRASH_POINTS) + f":{rng.randint(1, 2)}" if rng.random() < 0.3 else None
    return {"reindex": reindex, "crash": point, "second": second, "revert": rng.random() < 0.3, "rng": rng}


@pytest.mark.parametrize("seed", range(TRIALS))
def test_crash_then_recover(seed: int, baseline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, base_home, v0, v1, edited = baseline
    t = trial_plan(seed)
    home = tmp_path / "home"
    shutil.copytree(base_home, home)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url, token_budget=300 if t["reindex"] else 400)
    v2 = next_version(v1, edited, t["rng"])
    log = tmp_path / "embeds.log"
    ctx = SourceContext.open(load_settings(sources), "docs")
    version_before = ctx.store.sources.get("docs").active_version
    ctx.close()

    site.publish(v2.markdown())
    assert refresh(sources, "docs", home, crash=t["crash"], embed_log=log) == KILLED, t["crash"]
    if t["second"]:
        refresh(sources, "docs", home, crash=t["second"], embed_log=log)  # may finish instead
    final = v1 if t["revert"] else v2
    site.publish(final.markdown())
    assert refresh(sources, "docs", home, embed_log=log) == 0

    ctx = SourceContext.open(load_settings(sources), "docs")
    try:
        state = ctx.store.sources.get("docs")
        active = namespace("docs", state.active_version)
        got = [(r["url"], r["heading_path"], r["text"]) for r in ctx.vectors.records(active)]
        assert len(got) == len(set(got)), "duplicate records"
        assert set(got) == final.expected(site.base_url)
        assert reconcile(ctx).clean
        assert ctx.store.intents.pending("docs") == {}
        assert lancedb.connect(str(home / "vectors")).list_tables().tables == [active]
        if t["reindex"]:
            assert state.active_version == version_before + 1
        with ctx.store.engine.connect() as conn:
            cached = conn.execute(select(func.count()).select_from(schema.embedding_cache)).scalar_one()
    finally:
        ctx.close()
    # Every text embedded added one cache row: nothing was paid for twice ...
    assert cached == len(texts(v0) | texts(v1)) + texts_embedded(log)
    # ... and exactly the texts never embedded before were (all of them, unless reverted).
    never_embedded = texts(v2) - texts(v0) - texts(v1)
    if t["revert"]:  # v2's texts may or may not have been reached before the kill
        assert texts_embedded(log) <= len(never_embedded)
    else:
        assert texts_embedded(log) == len(never_embedded)
