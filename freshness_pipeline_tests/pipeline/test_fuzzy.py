"""The fuzzy threshold through `freshness run` (defaults: `fuzzy_threshold: 3`): a typo fix
in a long section keeps its vector, is logged with the words that differed, and the record
shows the page's new words at once (a payload update); a changed number, a dropped
negation, a renamed identifier or any edit inside code re-embeds."""

from __future__ import annotations

import json
import random
from pathlib import Path

import dagster as dg

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import paragraph

TYPO = "The server recieves each chunk and acknowledges it within a second."
NUMBER = "A failed upload is retried 3 times before the client gives up."
NEGATION = "Uploads are not resumed after a restart of the client."
IDENTIFIER = "Set max_retries in the config file to change the limit."
COMMAND = 'Install it first:\n\n```\npip install "fastapi[standard]"\n```\n\nThen start `fastapi dev` in a shell.'


def docs(section: str, extra: str = "") -> dict[str, str]:
    rng = random.Random(3)
    return {
        "guide/uploads.md": f"# Uploads\n\n## Retries\n\n{section}\n\n{extra}\n\n## Limits\n\n{paragraph(rng)}\n",
        "guide/other.md": f"# Other\n\n## Topic\n\n{paragraph(rng)}\n",
    }


def long_section() -> str:
    """~310 words: the four sentences under test between generated filler."""
    rng = random.Random(11)
    return " ".join(
        [
            paragraph(rng, 60),
            TYPO,
            paragraph(rng, 60),
            NUMBER,
            paragraph(rng, 60),
            NEGATION,
            paragraph(rng, 50),
            IDENTIFIER,
            paragraph(rng, 40),
        ]
    )


def fuzzy_log_lines(run_id: str) -> list[str]:
    logs = dg.DagsterInstance.get().all_logs(run_id)
    return [e.user_message for e in logs if e.user_message.startswith("fuzzy unchanged")]


def test_a_typo_fix_is_forgiven_and_meaningful_edits_are_not(dagster_home: Path) -> None:
    text = long_section()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs(text))
        assert fr.run()["embedded"] == 3
        (indexed,) = [r for r in fr.dump() if r["heading_path"] == "Uploads > Retries"]

        text = text.replace("recieves", "receives")
        site.publish(docs(text))
        c = fr.run()
        assert (c["sections_fuzzy_unchanged"], c["upserted"], c["embedded"]) == (1, 0, 0), c
        assert c["payload_updated"] == 1, c
        (line,) = fuzzy_log_lines(c["run_id"])
        assert line.endswith(": -recieves +receives") and indexed["id"] in line, line
        (record,) = [r for r in fr.dump() if r["id"] == indexed["id"]]
        assert record["text"] == text  # the reader sees the page as it is
        assert record["content_hash"] == indexed["content_hash"]  # of the embedded text: the vector stays
        (hit,) = json.loads(fr.cli("search", "receives each chunk", "-k", "1", "--json"))
        assert hit["id"] == indexed["id"] and "receives" in hit["text"] and hit["start"] is not None, hit

        for old, new in (("3 times", "5 times"), ("are not resumed", "are resumed"), ("max_retries", "max_attempts")):
            text = text.replace(old, new)
            site.publish(docs(text))
            c = fr.run()
            assert (c["sections_fuzzy_unchanged"], c["upserted"], c["embedded"]) == (0, 1, 1), f"{old} -> {new}: {c}"
            assert fuzzy_log_lines(c["run_id"]) == []
            (record,) = [r for r in fr.dump() if r["id"] == indexed["id"]]
            assert record["text"] == text, f"{old} -> {new}: the index holds stale text"


def test_a_command_edit_inside_code_is_never_forgiven(dagster_home: Path) -> None:
    """A few words changed inside a code block or a code span are a new command, however
    small the distance: re-embedded, never kept as a typo fix."""
    text = long_section()
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(docs(text, COMMAND))
        fr.run()
        for old, new in (('pip install "fastapi', 'uv add "fastapi'), ("`fastapi dev`", "`uv run fastapi dev`")):
            command = COMMAND.replace(old, new)
            site.publish(docs(text, command))
            c = fr.run()
            assert (c["sections_fuzzy_unchanged"], c["upserted"], c["embedded"]) == (0, 1, 1), f"{old} -> {new}: {c}"
            (record,) = [r for r in fr.dump() if r["heading_path"] == "Uploads > Retries"]
            assert new.strip("`") in record["text"], record["text"]
