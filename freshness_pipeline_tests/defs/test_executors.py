"""`FRESHNESS_EXECUTOR` picks the executor of the code location: Dagster's default, or the
dagster-celery executor with the broker from the environment; nonsense is refused by name."""

from __future__ import annotations

import pytest

from freshness_pipeline.defs.assets import vector_index
from freshness_pipeline.defs.executors import CELERY_QUEUE_TAG, EMBEDDINGS_QUEUE, refresh_executor


def test_default_and_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FRESHNESS_EXECUTOR", raising=False)
    assert refresh_executor() is None
    monkeypatch.setenv("FRESHNESS_EXECUTOR", "celery")
    monkeypatch.setenv("FRESHNESS_CELERY_BROKER", "pyamqp://guest:guest@127.0.0.1:5672//")
    celery = refresh_executor()
    assert celery is not None and celery.name == "celery"
    assert vector_index.op.tags[CELERY_QUEUE_TAG] == EMBEDDINGS_QUEUE


def test_an_unknown_executor_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRESHNESS_EXECUTOR", "spark")
    with pytest.raises(ValueError, match=r"\$FRESHNESS_EXECUTOR='spark': expected one of default, celery"):
        refresh_executor()
