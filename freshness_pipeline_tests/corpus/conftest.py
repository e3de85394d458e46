"""The shared corpora (`../shared/corpora`, or `$FRESHNESS_CORPORA`): missing is a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpora import CORPORA, corpora_root


@pytest.fixture(scope="session")
def corpora() -> Path:
    root = corpora_root()
    missing = [name for name in CORPORA if not (root / name / "revisions.json").is_file()]
    if missing:
        pytest.fail(
            f"the corpus replay needs {', '.join(missing)} under {root} (each with revisions.json "
            "and r0..r9/); set FRESHNESS_CORPORA to the folder holding them (.ci/run does)",
            pytrace=False,
        )
    return root
