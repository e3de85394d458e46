"""The golden set against a small real index built by the local model (all-MiniLM-L6-v2)
from the demo site: known hits and misses, stale retrieval while v2 is crawled but not yet
indexed, citation offsets, and the weak-match threshold's calibration (docs/metrics.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from freshness_pipeline.cli import main
from freshness_pipeline.config import load_settings
from freshness_pipeline.core.embedding_models import weak_threshold
from freshness_pipeline.core.versions import namespace
from freshness_pipeline.demo.run import SITE
from freshness_pipeline.demo.server import DocsSite, load_folder
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.crawl import crawl
from freshness_pipeline.pipeline.golden import evaluate, golden_file, load_golden
from freshness_pipeline.pipeline.search import search

RETRY = "how many times is an upload retried after a network error?"
TWO_FACTOR = "how do I turn on two-factor authentication?"
CONFLICT = "what happens when the same file changed on two devices?"
SHARED_LINK = "can a shared link expire?"  # its page only exists in v2
GOLDEN = [
    {"query": RETRY, "expect": "/configuration/", "stale_prone": True},
    {"query": TWO_FACTOR, "expect": "/security/"},
    {"query": CONFLICT, "expect": "/conflicts/"},
    {"query": SHARED_LINK, "expect": "/sharing/"},
]
ON_TOPIC = [
    "what is the default request timeout?",
    "can I limit upload bandwidth?",
    "are my files encrypted?",
    "how do I report a security vulnerability?",
    "who can change permissions on a shared folder?",
    "how do I install skyline sync on linux?",
    "how are conflicts detected?",
    "how do I share a folder with someone?",
]
OFF_TOPIC = [
    "recipe for chocolate cake",
    "who won the football world cup in 2014?",
    "how do I change the oil in my car?",
    "what is the capital of australia?",
    "how to train a puppy to sit",
    "how to grow tomatoes on a balcony",
    "cheap flights to new york",
    "what time is sunset in paris today?",
]


def cli_json(capsys: pytest.CaptureFixture[str], sources: Path, *args: str) -> object:
    assert main(["--sources", str(sources), *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_golden_set_on_the_local_model(dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "golden.yaml").write_text(yaml.safe_dump(GOLDEN))
    with DocsSite() as site:
        sources = tmp_path / "sources.yaml"
        sources.write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": "demo", "sitemap": site.sitemap_url, "golden_set": "golden.yaml"}],
                    "embedder": {"provider": "local"},
                }
            )
        )
        site.publish(load_folder(SITE / "v1"))
        assert cli_json(capsys, sources, "run")["status"] == "success"
        f = cli_json(capsys, sources, "status")[0]["freshness"]
        assert (f["hit_at_1"], f["hit_at_5"]) == (0.75, 0.75)  # three right at rank 1; v1 has no sharing page
        assert f["mrr"] == pytest.approx(0.75)
        assert f["details"]["golden_misses"] == [SHARED_LINK]
        assert f["stale_retrieval_rate"] == 0.0

        settings = load_settings(sources)
        src = settings.source("demo")
        cases = load_golden(golden_file(src))
        site.publish(load_folder(SITE / "v2"))
        ctx = SourceContext.open(settings, "demo")
        try:
            crawl(ctx, run_id="v2-crawl")  # the site moved on; the index still holds v1
            between = evaluate(ctx, cases, run_id="v2-crawl")  # judged against what that crawl saw
            assert between.namespace == namespace("demo", 1)
            # RETRY: its top answer's text changed on the site (no gone page in its top 5);
            # TWO_FACTOR and SHARED_LINK: their top 5 hold sections of the gone legacy-api
            # page; CONFLICT's top 5 (conflicts, security, index) did not change.
            tops = dict(zip([c.query for c in cases], between.top_urls, strict=True))
            assert not any(u.endswith("/legacy-api") for u in tops[RETRY])
            assert all(any(u.endswith("/legacy-api") for u in tops[q]) for q in (TWO_FACTOR, SHARED_LINK))
            assert between.stale_queries == [RETRY, TWO_FACTOR, SHARED_LINK]
            assert between.stale_retrieval_rate == 0.75
        finally:
            ctx.close()

        assert cli_json(capsys, sources, "run")["status"] == "success"
        status = cli_json(capsys, sources, "status")[0]
        f = status["freshness"]
        assert (f["hit_at_1"], f["hit_at_5"], f["stale_retrieval_rate"]) == (1.0, 1.0, 0.0)
        assert f["details"]["golden_misses"] == []
        assert 0 < f["stale_share"] < 1 and f["score"] == 1.0  # the drift found is repaired by the commit

        # Citations: the section key and its character span in the page's normalized text.
        top = search(settings, RETRY, k=3)[0]
        assert top.url.endswith("/configuration") and top.heading_path == "Configuration > Network settings"
        ctx = SourceContext.open(settings, "demo")
        try:
            page = ctx.store.pages.markdown("demo", [top.url])[top.url]
            # Weak-match calibration on v2 (docs/metrics.md): every off-topic query falls
            # under the threshold, the on-topic ones stay over it.
            ns = namespace("demo", ctx.store.sources.get("demo").active_version)
            vectors = ctx.embedder.embed([*ON_TOPIC, *OFF_TOPIC])
            best = [ctx.vectors.query(ns, v.tolist(), 1)[0].score for v in vectors]
        finally:
            ctx.close()
        threshold = weak_threshold("all-MiniLM-L6-v2")
        assert all(b >= threshold for b in best[: len(ON_TOPIC)]), best
        assert all(b < threshold for b in best[len(ON_TOPIC) :]), best
        assert page[top.start : top.end] == top.text and "retry_limit" in top.text
        search(settings, OFF_TOPIC[0], k=3)  # weak: recorded
        weak = cli_json(capsys, sources, "weak")
        assert [w["query"] for w in weak] == [OFF_TOPIC[0]] and weak[0]["best_score"] < threshold
        status = cli_json(capsys, sources, "status")[0]
        assert status["citations"]["rate"] == 1.0 and status["citations"]["keys"] >= 3
