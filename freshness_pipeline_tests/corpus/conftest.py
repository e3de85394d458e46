"""The shared corpora (`../shared/corpora`, or `$FRESHNESS_CORPORA`). Their text belongs to
other projects and is not in the repository: a clone without them skips the replay and
says how to run it. Under `CI=true`, or when $FRESHNESS_CORPORA names a folder (.ci/run
sets it), a missing corpus is a failure.
The synthetic replay (pipeline/test_synthetic_replay.py) proves the planner either way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .corpora import CORPORA, corpora_root

RUN_IT = "FRESHNESS_CORPORA=/path/to/corpora python -m pytest freshness_pipeline_tests/corpus"


def missing_corpora(root: Path) -> list[str]:
    return [name for name in CORPORA if not (root / name / "revisions.json").is_file()]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def corpora() -> Path:
    root = corpora_root()
    missing = missing_corpora(root)
    if not missing:
        return root
    why = f"corpus replay: no {', '.join(missing)} corpus under {root} (each with revisions.json and r0..r9/)"
    if in_ci() or os.environ.get("FRESHNESS_CORPORA"):
        pytest.fail(f"{why}; under CI or a set FRESHNESS_CORPORA it must run: point it at them", pytrace=False)
    pytest.skip(f"{why}; run it with `{RUN_IT}`")
