"""The executor the code location runs its jobs with, chosen by `FRESHNESS_EXECUTOR`:
`in_process` (the default: every step in its run's process, docs/benchmarks.md),
`multiprocess` (Dagster's default: a process per step) or `celery`
(`dagster_celery.celery_executor`, `vector_index` on the `embeddings` queue). The runs and
the workers (`celery_app.py`) build the Celery settings with the same `celery_settings`,
from the environment only (docs/deploy.md says what each setting does)."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import dagster as dg

from ..config import require_extra

EXECUTOR_ENV = "FRESHNESS_EXECUTOR"
BROKER_ENV = "FRESHNESS_CELERY_BROKER"
BACKEND_ENV = "FRESHNESS_CELERY_BACKEND"
VISIBILITY_ENV = "FRESHNESS_CELERY_VISIBILITY_TIMEOUT"
KEY_PREFIX_ENV = "FRESHNESS_CELERY_KEY_PREFIX"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
DEFAULT_VISIBILITY_S = 1800  # below the shipped max_runtime_seconds (3600): docs/deploy.md
CELERY_QUEUE_TAG = "dagster-celery/queue"
DEFAULT_QUEUE = "dagster"  # dagster-celery's queue for a step without that tag
# On the refresh job's runs: which broker a failure names, and (Redis) when a dead worker's task comes back.
BROKER_TAG = "freshness/celery-broker"
VISIBILITY_TAG = "freshness/celery-visibility-timeout"
EMBEDDINGS_QUEUE = "embeddings"
CHOICES = ("in_process", "multiprocess", "celery")
REDIS_SCHEMES = ("redis", "rediss")
AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
# dagster-celery's own transport options: `config_source` replaces the key, so keep them.
DAGSTER_CELERY_TRANSPORT = {"max_retries": 3, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
BROKER_PROBE_S = 5.0  # how long `broker_unreachable` tries the broker


def executor_name() -> str:
    name = os.environ.get(EXECUTOR_ENV) or "in_process"
    if name not in CHOICES:
        raise ValueError(f"${EXECUTOR_ENV}={name!r}: expected one of {', '.join(CHOICES)}")
    return name


def _scheme(url: str, var: str, allowed: tuple[str, ...]) -> str:
    scheme = urlsplit(url).scheme
    if scheme not in allowed:
        raise ValueError(f"${var}={url!r}: expected a URL starting with one of {', '.join(s + '://' for s in allowed)}")
    return scheme


def _seconds(var: str, default: int) -> int:
    raw = os.environ.get(var, "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise ValueError(f"${var}={raw!r}: expected a whole number of seconds above 0")
    return int(raw)


def celery_settings() -> dict[str, Any]:
    """`dagster_celery.celery_executor`'s config, for the runs and the workers alike: the
    broker from `FRESHNESS_CELERY_BROKER` (Redis or RabbitMQ); the result backend from
    `FRESHNESS_CELERY_BACKEND`, else the broker itself for Redis and `rpc://` (results as AMQP
    messages) for RabbitMQ, which is no result backend of its own."""
    broker = os.environ.get(BROKER_ENV) or DEFAULT_BROKER
    scheme = _scheme(broker, BROKER_ENV, REDIS_SCHEMES + AMQP_SCHEMES)
    backend = os.environ.get(BACKEND_ENV) or (broker if scheme in REDIS_SCHEMES else "rpc://")
    _scheme(backend, BACKEND_ENV, (*REDIS_SCHEMES, "rpc"))
    transport: dict[str, Any] = dict(DAGSTER_CELERY_TRANSPORT)
    conf: dict[str, Any] = {
        "task_acks_late": True,  # a task stays on the broker until its step ends
        "task_reject_on_worker_lost": True,  # a pool child killed mid-task: back to the queue
        "worker_prefetch_multiplier": 1,  # a worker holds no task it is not running
        "broker_transport_options": transport,
    }
    if scheme in REDIS_SCHEMES:
        visibility = _seconds(VISIBILITY_ENV, DEFAULT_VISIBILITY_S)
        # Sweep for abandoned tasks every tenth of the timeout (Redis' default: every 100 s).
        transport |= {
            "visibility_timeout": visibility,
            "unacked_restore_interval": max(1, min(10, visibility // 10)),
            "unacked_restore_throttle": 1,
        }
    prefix = os.environ.get(KEY_PREFIX_ENV)
    if prefix:  # Redis only: keys of their own on a shared database
        if scheme not in REDIS_SCHEMES:
            raise ValueError(f"${KEY_PREFIX_ENV} is for a Redis broker; {BROKER_ENV} is {scheme}://")
        transport["global_keyprefix"] = prefix
        if urlsplit(backend).scheme in REDIS_SCHEMES:
            conf["result_backend_transport_options"] = {"global_keyprefix": prefix}
    return {"broker": broker, "backend": backend, "config_source": conf}


def shown_url(url: str) -> str:
    """`url` without its password, to show in a run's tags and errors."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def executor_tags() -> dict[str, str]:
    """The tags of the refresh job's runs: under the Celery executor, its broker, so that a run
    the broker refused names it (`run_status.py`), and on Redis its visibility timeout, so
    that `--submit` says when a dead worker's task comes back (`worker_watch.py`)."""
    if executor_name() != "celery":
        return {}
    settings = celery_settings()
    transport = settings["config_source"]["broker_transport_options"]
    visibility = {VISIBILITY_TAG: str(transport["visibility_timeout"])} if "visibility_timeout" in transport else {}
    return {BROKER_TAG: shown_url(settings["broker"]), **visibility}


def broker_unreachable(shown: str) -> str | None:
    """Why the configured Celery broker cannot be reached ("Class: message", tried for at most
    `BROKER_PROBE_S` through kombu's `Connection.ensure_connection`), or None when it can, or
    when it is not the broker `shown` (a run's tag) names."""
    broker = celery_settings()["broker"]
    if shown_url(broker) != shown:
        return None
    from kombu import Connection

    try:
        with Connection(broker, connect_timeout=BROKER_PROBE_S) as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_PROBE_S)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def refresh_executor() -> dg.ExecutorDefinition | None:
    """None: Dagster's default executor."""
    name = executor_name()
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        return None
    require_extra("celery", f"${EXECUTOR_ENV}=celery")
    from dagster_celery import celery_executor

    return celery_executor.configured(celery_settings())
