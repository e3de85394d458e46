"""The executor the code location runs its jobs with, chosen by `FRESHNESS_EXECUTOR`.

- `default`: Dagster's default (multiprocess; `execution: {config: {in_process: {}}}` in the
  run config keeps every step in the run worker, as `freshness run` does).
- `celery`: `dagster_celery.celery_executor`. Each step is a Celery task; `vector_index`
  carries the op tag `dagster-celery/queue: embeddings`, so only the workers started on that
  queue embed (size that pool to the provider's rate limit). The broker and the result
  backend come from `FRESHNESS_CELERY_BROKER` / `FRESHNESS_CELERY_BACKEND` (default Redis at
  127.0.0.1:6379; RabbitMQ: `pyamqp://guest@127.0.0.1:5672//`).
"""

from __future__ import annotations

import os

import dagster as dg

EXECUTOR_ENV = "FRESHNESS_EXECUTOR"
BROKER_ENV = "FRESHNESS_CELERY_BROKER"
BACKEND_ENV = "FRESHNESS_CELERY_BACKEND"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
CELERY_QUEUE_TAG = "dagster-celery/queue"
EMBEDDINGS_QUEUE = "embeddings"
CHOICES = ("default", "celery")


def executor_name() -> str:
    name = os.environ.get(EXECUTOR_ENV, "default")
    if name not in CHOICES:
        raise ValueError(f"${EXECUTOR_ENV}={name!r}: expected one of {', '.join(CHOICES)}")
    return name


def broker_url() -> str:
    return os.environ.get(BROKER_ENV, DEFAULT_BROKER)


def backend_url() -> str:
    return os.environ.get(BACKEND_ENV) or broker_url()


def refresh_executor() -> dg.ExecutorDefinition | None:
    """None: Dagster's default executor."""
    if executor_name() == "default":
        return None
    from dagster_celery import celery_executor  # installed with the `celery` deployment

    return celery_executor.configured({"broker": broker_url(), "backend": backend_url()})
