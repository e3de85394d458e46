"""A golden query that misses on 3 consecutive runs requests a full re-index, which the
next run performs like a version bump; status lists the probable chunking problem. The
same runs deliver their change events to a webhook and record Dagster metadata."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.store import StateStore
from freshness_pipeline.cli import main
from freshness_pipeline.demo.run import SITE
from freshness_pipeline.demo.server import DocsSite, load_folder
from freshness_pipeline_tests.metrics.receiver import Receiver, free_port

NEVER = "where are the release notes for the mobile app?"
ALWAYS = "Turn on two-factor authentication from the account page"


def cli_json(capsys: pytest.CaptureFixture[str], sources: Path, *args: str) -> object:
    assert main(["--sources", str(sources), *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_three_consecutive_misses_trigger_a_full_reindex(
    dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "x")
    (tmp_path / "golden.yaml").write_text(
        yaml.safe_dump([{"query": NEVER, "expect": "/mobile/"}, {"query": ALWAYS, "expect": "/security/"}])
    )
    state = f"sqlite:///{tmp_path / 'state.db'}"
    with DocsSite() as site, Receiver(free_port()) as rx:
        sources = tmp_path / "sources.yaml"
        sources.write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": "docs", "sitemap": site.sitemap_url, "golden_set": "golden.yaml"}],
                    "embedder": {"provider": "hashing"},
                    "state_url": state,
                    "webhooks": [{"url": rx.url, "secret_env": "HOOK_SECRET", "attempts": 2, "backoff_s": 0.01}],
                }
            )
        )
        site.publish(load_folder(SITE / "v1"))
        for n in (1, 2, 3):
            assert cli_json(capsys, sources, "run")["status"] == "success"
            status = cli_json(capsys, sources, "status")[0]
            assert status["freshness"]["hit_at_5"] == 0.5
            assert status["freshness"]["details"]["golden_misses"] == [NEVER]
            assert (status["reindex_requested"] is not None) == (n == 3)
        assert "missed 3 consecutive runs" in status["reindex_requested"]
        assert {(m["kind"], m["subject"], m["consecutive"]) for m in status["chunking_problems"]} == {
            ("query", NEVER, 3),
            ("section", "/mobile/", 3),
        }

        assert cli_json(capsys, sources, "run")["status"] == "success"  # the re-index
        store = StateStore(state)
        last = store.runs.recent("docs", limit=1)[0]
        assert (
            last["reason"].startswith("golden set:")
            and last["counts"]["upserted"] == last["counts"]["sections_indexed"]
        )
        assert store.sources.get("docs").active_version == 2
        status = cli_json(capsys, sources, "status")[0]
        assert status["reindex_requested"] is None  # settled: the re-index landed
        assert [m["consecutive"] for m in status["chunking_problems"]] == [4, 4]  # still missing
        assert len(status["freshness_history"]) == 4

        with store.engine.connect() as conn:
            outbox = [r.id for r in conn.execute(schema.change_events.select().order_by(schema.change_events.c.id))]
        store.close()
    assert outbox and [e["id"] for e in rx.events()] == outbox  # every event, in order

    mats = dg.DagsterInstance.get().fetch_materializations(dg.AssetKey("freshness_metrics"), limit=1).records
    meta = mats[0].asset_materialization.metadata
    assert meta["hit_at_5"].value == 0.5 and meta["webhook_backlog"].value == 0
    assert len(meta["history"].value.records) == 4 and "history_md" not in meta  # one history, a table
