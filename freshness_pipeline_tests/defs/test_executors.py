"""`FRESHNESS_EXECUTOR` picks the executor of the code location: in-process (the default),
Dagster's default (multiprocess), or the dagster-celery executor with the broker from the
environment; nonsense is refused by name."""

from __future__ import annotations

import dagster as dg
import pytest

from freshness_pipeline.defs.assets import vector_index
from freshness_pipeline.defs.executors import CELERY_QUEUE_TAG, EMBEDDINGS_QUEUE, celery_settings, refresh_executor


def test_in_process_by_default_multiprocess_and_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FRESHNESS_EXECUTOR", raising=False)
    assert refresh_executor() is dg.in_process_executor
    monkeypatch.setenv("FRESHNESS_EXECUTOR", "multiprocess")
    assert refresh_executor() is None  # Dagster's default
    monkeypatch.setenv("FRESHNESS_EXECUTOR", "celery")
    monkeypatch.setenv("FRESHNESS_CELERY_BROKER", "pyamqp://guest:guest@127.0.0.1:5672//")
    celery = refresh_executor()
    assert celery is not None and celery.name == "celery"
    assert vector_index.op.tags[CELERY_QUEUE_TAG] == EMBEDDINGS_QUEUE


def test_an_unknown_executor_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRESHNESS_EXECUTOR", "spark")
    with pytest.raises(
        ValueError, match=r"\$FRESHNESS_EXECUTOR='spark': expected one of in_process, multiprocess, celery"
    ):
        refresh_executor()


def test_rabbitmq_gets_a_result_backend_celery_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/deploy.md's RabbitMQ URL: the broker alone is no result backend (`pyamqp` is no
    backend scheme: `No module named 'pyamqp'`); the results go back over AMQP (`rpc://`)."""
    from celery import Celery
    from celery.app.backends import by_url

    monkeypatch.setenv("FRESHNESS_CELERY_BROKER", "pyamqp://guest:guest@127.0.0.1:5672//")
    monkeypatch.delenv("FRESHNESS_CELERY_BACKEND", raising=False)
    settings = celery_settings()
    assert settings["broker"] == "pyamqp://guest:guest@127.0.0.1:5672//" and settings["backend"] == "rpc://"
    backend, _ = by_url(settings["backend"])
    assert backend(app=Celery(broker=settings["broker"])) is not None  # importable and constructible
    assert "visibility_timeout" not in settings["config_source"]["broker_transport_options"]


def test_a_lost_step_goes_back_to_the_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRESHNESS_CELERY_BROKER", "redis://127.0.0.1:6379/3")
    monkeypatch.setenv("FRESHNESS_CELERY_VISIBILITY_TIMEOUT", "120")
    monkeypatch.setenv("FRESHNESS_CELERY_KEY_PREFIX", "mine:")
    conf = celery_settings()["config_source"]
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"] and conf["worker_prefetch_multiplier"] == 1
    transport = conf["broker_transport_options"]
    assert (transport["visibility_timeout"], transport["unacked_restore_interval"]) == (120, 10)
    assert transport["global_keyprefix"] == conf["result_backend_transport_options"]["global_keyprefix"] == "mine:"
    assert transport["max_retries"] == 3  # dagster-celery's own options kept


def test_the_workers_app_has_the_runs_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    monkeypatch.setenv("FRESHNESS_CELERY_BROKER", "amqp://guest:guest@127.0.0.1:5672/v")
    sys.modules.pop("freshness_pipeline.defs.celery_app", None)
    module = importlib.import_module("freshness_pipeline.defs.celery_app")
    conf = module.app.conf
    assert (conf.broker_url, conf.result_backend) == ("amqp://guest:guest@127.0.0.1:5672/v", "rpc://")
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert module.execute_plan.acks_late and module.execute_plan.name == "execute_plan"
    sys.modules.pop("freshness_pipeline.defs.celery_app", None)


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("FRESHNESS_CELERY_BROKER", "sqs://x", r"\$FRESHNESS_CELERY_BROKER='sqs://x': expected a URL starting with"),
        ("FRESHNESS_CELERY_VISIBILITY_TIMEOUT", "soon", r"expected a whole number of seconds above 0"),
    ],
)
def test_bad_celery_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=message):
        celery_settings()
