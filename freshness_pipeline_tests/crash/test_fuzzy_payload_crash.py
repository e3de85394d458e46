"""A refresh SIGKILLed while it writes a fuzzy-unchanged section's new text (a payload
update that keeps the vector of the embedded text): the next run ends with the live
text (or, when the site reverted, the old one) over the same vector, reconcile clean, no
intent left, and nothing embedded by either run."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from freshness_pipeline.config import load_settings
from freshness_pipeline.core.versions import namespace
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.reconcile import reconcile
from freshness_pipeline_tests.crash.child import refresh, texts_embedded
from freshness_pipeline_tests.crash.test_crash_trials import KILLED, write_sources
from freshness_pipeline_tests.sitegen import paragraph

TYPO = "The server recieves each chunk and acknowledges it within a second."


def docs(section: str) -> dict[str, str]:
    rng = random.Random(3)
    return {
        "guide/uploads.md": f"# Uploads\n\n## Retries\n\n{section}\n\n## Limits\n\n{paragraph(rng)}\n",
        "guide/other.md": f"# Other\n\n## Topic\n\n{paragraph(rng)}\n",
    }


def records(sources: Path) -> dict[str, tuple[str, str]]:
    """heading path -> (text, content hash) of the active namespace; asserts it is sound."""
    ctx = SourceContext.open(load_settings(sources), "docs")
    try:
        state = ctx.store.sources.get("docs")
        got = {
            r["heading_path"]: (r["text"], r["content_hash"])
            for r in ctx.vectors.records(namespace("docs", state.active_version))
        }
        assert reconcile(ctx).clean
        assert ctx.store.intents.pending("docs") == {}
    finally:
        ctx.close()
    return got


@pytest.mark.parametrize("revert", [False, True])
def test_a_crash_in_a_fuzzy_payload_update_recovers(
    revert: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    before = " ".join([paragraph(rng, 120), TYPO, paragraph(rng, 120)])
    after = before.replace("recieves", "receives")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    log = tmp_path / "embeds.log"
    with DocsSite() as site:
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)  # fuzzy_threshold: the default, 3
        site.publish(docs(before))
        assert refresh(sources, "docs", home, embed_log=log) == 0
        (indexed_text, indexed_hash) = records(sources)["Uploads > Retries"]
        assert indexed_text == before
        embedded_first = texts_embedded(log)

        site.publish(docs(after))
        assert refresh(sources, "docs", home, crash="payload", embed_log=log) == KILLED
        live = before if revert else after
        site.publish(docs(live))
        assert refresh(sources, "docs", home, embed_log=log) == 0

        assert records(sources)["Uploads > Retries"] == (live, indexed_hash)  # the live words, the same vector
        assert texts_embedded(log) == embedded_first  # the typo fix cost no embedding, crash or not
