"""The asset checks through the `refresh` job on a generated site: the blocking change-spike
check stops `vector_index` and the override tag lets it through; stale share, reconcile and
flagged pages report what they should."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.config import load_settings, state_url
from freshness_pipeline.core.spike import history_shares, judge, suspects
from freshness_pipeline.defs.run_status import ended
from freshness_pipeline.defs.runner import run_refresh
from freshness_pipeline.defs.tags import ALLOW_SPIKE_TAG
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline_tests.defs.harness import SOURCE, check_result, materialized, refresh
from freshness_pipeline_tests.sitegen import Site, generate, paragraph

ASSETS = {"fetched_pages", "section_manifest", "diff_plan", "vector_index"}
FEEDBACK = "Was this page helpful? Tell us in the forum."


def edit_one(site: Site, rng: random.Random) -> Site:
    out = Site(copy.deepcopy(site.pages))
    rel = rng.choice(sorted(out.pages))
    heading, _ = out.pages[rel][0]
    out.pages[rel][0] = (heading, paragraph(rng))
    return out


def manifest_texts() -> list[str]:
    store = StateStore(state_url(load_settings()))
    try:
        return [s.text for s in store.manifest.sections(SOURCE)]
    finally:
        store.close()


def test_change_spike_blocks_vector_index_until_the_override(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    rng = random.Random(11)
    docs = generate(8, sections_per_page=3, seed=5)
    site.publish(docs.markdown())
    first = refresh(instance)
    assert first.success and materialized(first) >= ASSETS
    assert check_result(first, "change_spike").passed  # no history yet: never a spike
    for _ in range(2):  # normal runs: one section edited each time
        docs = edit_one(docs, rng)
        site.publish(docs.markdown())
        normal = refresh(instance)
        assert normal.success and check_result(normal, "change_spike").passed

    # A template redeploy: the same feedback line lands in every section.
    redeploy = Site({rel: [(h, f"{t} {FEEDBACK}") for h, t in secs] for rel, secs in docs.pages.items()})
    site.publish(redeploy.markdown())
    blocked = refresh(instance)
    spike = check_result(blocked, "change_spike")
    assert not spike.passed and spike.severity == dg.AssetCheckSeverity.ERROR, spike.metadata
    assert materialized(blocked) == ASSETS - {"vector_index"}  # nor anything downstream
    assert not blocked.success  # the failed blocking check fails the run, at diff_plan's step
    (failure,) = [e for e in blocked.all_events if e.is_step_failure]
    assert failure.step_key == "diff_plan" and "change_spike" in failure.step_failure_data.error.message
    assert spike.metadata["change_share"].value == 1.0
    assert f"+ {FEEDBACK}" in table_text(spike.metadata["suspects"])  # the suspect phrase, in 24 sections
    assert "/guide/page" in spike.description and ALLOW_SPIKE_TAG in spike.description
    assert not any(FEEDBACK in t for t in manifest_texts())  # the index was not touched
    # The run failure sensor's summary of it (a sensor's run: no command waited for it).
    sensed = ended(instance, load_settings(), instance.get_run_by_id(blocked.run_id))
    assert sensed["status"] == "blocked" and sensed["message"].startswith("change_spike: ")
    assert sensed["crawled"] == 8 and sensed["run_id"] == blocked.run_id  # its crawl's materialization
    # `freshness run` says so, naming the check and what to do.
    cli = run_refresh(SOURCE)
    assert cli["status"] == "blocked" and cli["message"].startswith("change_spike: ")
    assert ALLOW_SPIKE_TAG in cli["message"]
    assert not any(FEEDBACK in t for t in manifest_texts())

    allowed = refresh(instance, tags={ALLOW_SPIKE_TAG: "true"})
    spike = check_result(allowed, "change_spike")
    assert not spike.passed and spike.severity == dg.AssetCheckSeverity.WARN
    assert spike.metadata["override"].value is True
    assert allowed.success and materialized(allowed) >= ASSETS
    assert instance.get_run_by_id(allowed.run_id).tags[ALLOW_SPIKE_TAG] == "true"  # recorded
    assert all(FEEDBACK in t for t in manifest_texts())
    # The redeploy run found all of it stale and repaired it: information, not a failure; and
    # the index after its commit is fresh, so no freshness alert either.
    stale = check_result(allowed, "stale_share")
    assert stale.passed and stale.metadata["stale_share"].value == 1.0
    assert "refresh this source more often" in (stale.description or "")
    assert "rewrites them" in (stale.description or "")
    assert check_result(allowed, "reconcile_clean").passed
    alert = check_result(allowed, "freshness_alert")
    assert alert.passed and alert.metadata["score_after_commit"].value == 1.0, alert.description


def rewrite(site: Site, rng: random.Random, pages: int) -> Site:
    """Every section of the first `pages` pages gets a new paragraph."""
    out = Site(copy.deepcopy(site.pages))
    for rel in sorted(out.pages)[:pages]:
        out.pages[rel] = [(h, paragraph(rng)) for h, _ in out.pages[rel]]
    return out


def test_an_overridden_spike_does_not_weaken_the_next_check(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    body = yaml.safe_load(sources.read_text())
    body["sources"][0]["fetch"] = {"quarantine": {"rewritten": {"confirm": 0}}}  # the spike check alone, no quarantine
    sources.write_text(yaml.safe_dump(body))
    rng = random.Random(3)
    docs = generate(20, sections_per_page=4, seed=8)  # 80 sections
    site.publish(docs.markdown())
    assert refresh(instance).success
    docs = edit_one(docs, rng)  # one normal run: 1 of 80
    site.publish(docs.markdown())
    assert refresh(instance).success
    docs = rewrite(docs, rng, 15)  # 60 of 80, reviewed and let through
    site.publish(docs.markdown())
    allowed = refresh(instance, tags={ALLOW_SPIKE_TAG: "true"})
    assert allowed.success and not check_result(allowed, "change_spike").passed
    untouched = check_result(allowed, "change_spike").metadata  # the history without the override

    docs = rewrite(docs, rng, 15)  # the same size of change again, without the override
    site.publish(docs.markdown())
    blocked = refresh(instance)
    spike = check_result(blocked, "change_spike")
    assert not spike.passed and spike.severity == dg.AssetCheckSeverity.ERROR, spike.metadata
    assert spike.metadata["change_share"].value == 0.75
    assert "vector_index" not in materialized(blocked)
    # Judged against the same history as on a copy that never saw the override.
    assert spike.metadata["history_runs"].value == untouched["history_runs"].value == 1
    assert spike.metadata["history_median"].value == untouched["history_median"].value
    store = StateStore(state_url(load_settings()))
    try:
        overridden = store.runs.recent(SOURCE)[0]  # the blocked run committed nothing
    finally:
        store.close()
    assert overridden["run_id"] == allowed.run_id
    assert overridden["counts"]["spike_override"] == 1  # recorded with the run itself


def test_stale_share_reconcile_and_flagged_pages(sources: Path, site: DocsSite, instance: dg.DagsterInstance) -> None:
    data = yaml.safe_load(sources.read_text())
    data["sources"][0]["checks"] = {"freshness_alert": 0.99}
    sources.write_text(yaml.safe_dump(data))
    docs = generate(10, sections_per_page=3, seed=2)  # 30 sections
    site.publish(docs.markdown())
    assert refresh(instance).success

    # One edited section of 30 (3.3%): WARN. A page turned into an error page: flagged.
    edited = edit_one(docs, random.Random(1))
    edited.pages["guide/page9.md"] = []
    site.publish({**edited.markdown(), "guide/page9.md": "# Not found\n\nPage not found.\n"})
    result = refresh(instance)
    stale = check_result(result, "stale_share")
    assert stale.passed and "(3.33%) had drifted since the last run ≥ 2%" in (stale.description or "")
    assert stale.metadata["stale_share"].value == pytest.approx(1 / 30, abs=1e-3)
    flagged = check_result(result, "flagged_pages")
    assert not flagged.passed and flagged.severity == dg.AssetCheckSeverity.WARN
    assert flagged.metadata["flagged"].value == 1 and "/guide/page9" in table_text(flagged.metadata["pages"])
    # The flagged page keeps its last good text, unverified: the score after the commit says so.
    alert = check_result(result, "freshness_alert")
    assert not alert.passed and alert.severity == dg.AssetCheckSeverity.WARN
    assert alert.description.startswith("score after the commit 0.984 < 0.99: fetch error share 10.0%")
    assert check_result(result, "reconcile_clean").passed

    # Drift: a record deleted behind the manifest's back.
    ctx = SourceContext.open(load_settings(), SOURCE)
    try:
        ns = f"{SOURCE}-v{ctx.store.sources.get(SOURCE).active_version}"
        gone = sorted(ctx.store.manifest.hashes(SOURCE))[0]
        ctx.vectors.delete(ns, [gone])
    finally:
        ctx.close()
    drift = check_result(refresh(instance), "reconcile_clean")
    assert not drift.passed and drift.severity == dg.AssetCheckSeverity.ERROR
    assert drift.metadata["missing"].value == 1 and drift.metadata["missing_ids"].value == [gone]


def test_spike_rule() -> None:
    policy = load_policy()
    quiet = [{"counts": {"sections_indexed": 100, "upserted": n}, "reason": None} for n in (2, 3, 4)]
    first = {"counts": {"sections_indexed": 100, "upserted": 100}, "reason": None}
    reindex = {"counts": {"sections_indexed": 100, "upserted": 100}, "reason": "version change"}
    overridden = {"counts": {"sections_indexed": 100, "upserted": 75, "spike_override": 1}, "reason": None}
    history = history_shares([*quiet, first, reindex, overridden])
    assert history == [0.02, 0.03, 0.04]
    assert judge(0.9, [], policy).spike is False  # no history
    assert judge(0.9, history, policy).spike is True
    assert judge(0.4, history, policy).spike is False  # under spike_min_share
    assert judge(0.6, [0.2, 0.2], policy).spike is False  # under spike_factor x median
    found = suspects([("a b c", "a b c x y"), ("d e", "d e x y"), ("f", "g")])
    assert found[0] == ("+ x y", 2)


def load_policy():
    from freshness_pipeline.config import CheckPolicy

    return CheckPolicy().spike_rule()


def table_text(value: dg.MetadataValue) -> str:
    """The cells of a table metadata value, one row a line."""
    assert isinstance(value, dg.TableMetadataValue), value
    return "\n".join(" | ".join(str(v) for v in r.data.values()) for r in value.records)
