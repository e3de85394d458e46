"""The Dagster instance settings this project runs with: `dagster_home/dagster.yaml` ships
them, and the CLI and the demo write them into a `$DAGSTER_HOME` that has no dagster.yaml
(without one, Dagster prints its telemetry welcome on every command and runs with no pool
limit, no run monitoring and no per-source queue), and keep them current in one an earlier
release wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..config import ConfigError
from ..settings_errors import yaml_problem

INSTANCE_CONFIG: dict[str, Any] = {
    "telemetry": {"enabled": False},
    # The run's event log keeps INFO and up: each event is one write to the event log, and the
    # IO manager's DEBUG lines ("Writing file at ...", "Loading partition ...") would be a
    # tenth of a refresh's events. Dagster's own events are kept whatever the level.
    "python_logs": {"python_log_level": "INFO"},
    # Dagster's run queue, dequeued by `dagster-daemon` (which `dg dev` starts) every second
    # (Dagster's default, 5 s, keeps a queued run waiting 2.5 s on average). `freshness run`
    # on the embedded instance executes its runs itself and does not queue.
    "run_coordinator": {
        "module": "dagster._core.run_coordinator",
        "class": "QueuedRunCoordinator",
        "config": {"dequeue_interval_seconds": 1},
    },
    "concurrency": {
        # The run queue: one run per source at a time (`freshness run` too waits for a
        # source's run in flight before it starts its own).
        "runs": {
            "max_concurrent_runs": 4,
            "tag_concurrency_limits": [
                {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
            ],
        },
        # Every pool, `embeddings` (vector_index, the provider's rate limit) included: one slot.
        "pools": {"default_limit": 1, "granularity": "op"},
    },
    # The daemon fails runs stuck starting or canceling, fails a run that outlives
    # max_runtime_seconds (a run whose process was killed stays STARTED until then; the
    # `dagster/max_runtime` tag sets it per run), and frees the pool slots of ended runs.
    "run_monitoring": {
        "enabled": True,
        "start_timeout_seconds": 300,
        "cancel_timeout_seconds": 300,
        "max_runtime_seconds": 3600,
        "poll_interval_seconds": 30,
        "free_slots_after_run_end_seconds": 10,
    },
}

HEADER = """# The Dagster instance for freshness_pipeline (written by `freshness`; see docs/dagster.md):
# telemetry off, the run queue (one run per source), the `embeddings` pool limit, run monitoring.
"""
MARK = "(written by `freshness`"  # in the header of every release's dagster.yaml
_ABSENT: Any = object()  # a setting the file does not have


def write_instance_config(home: Path) -> list[str]:
    """Write `home/dagster.yaml`, or keep current the settings this project manages (the
    top-level keys of `INSTANCE_CONFIG`) in one that `freshness` wrote, whatever its release:
    a release's settings may name code the next one no longer has. The keys a user added
    are kept. A dagster.yaml of the user's own is not touched: its differences are said.
    Returns what it wrote or changed (or would), one line each; none when all is current."""
    path = home / "dagster.yaml"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + yaml.safe_dump(INSTANCE_CONFIG, sort_keys=False))
        return [f"{path}: written (docs/dagster.md)"]
    text = path.read_text()
    try:
        found = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(found, dict):
        raise ConfigError(f"{path}: not a mapping of Dagster's instance settings")
    changes = [
        f"{key}: {change}" for key in INSTANCE_CONFIG for change in _differences(found.get(key), INSTANCE_CONFIG[key])
    ]
    if not changes:
        return []
    if MARK not in text.split("\n", 1)[0]:
        return [
            f"{path} is not one `freshness` wrote, so it is left as it is; to run as shipped, set " + c for c in changes
        ]
    path.write_text(HEADER + yaml.safe_dump({**found, **INSTANCE_CONFIG}, sort_keys=False))
    return [f"{path}: {c}" for c in changes]


def _differences(old: Any, new: Any, at: str = "") -> list[str]:
    """What turns `old` into `new`, one line per setting (dotted paths below the key)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            line
            for k in dict.fromkeys([*new, *old])
            for line in _differences(old.get(k, _ABSENT), new.get(k, _ABSENT), f"{at}.{k}" if at else str(k))
        ]
    if old == new:
        return []
    where = f"{at} " if at else ""
    if new is _ABSENT:
        return [f"{where}removed (was {old!r})"]
    if old is _ABSENT or old is None:
        return [f"{where}set to {new!r}"]
    return [f"{where}{old!r} -> {new!r}"]


def instance_variables(home: Path) -> set[str]:
    """The environment variables `home/dagster.yaml` reads (`{env: NAME}`, as
    `dagster.postgres.yaml` does); none when it is not YAML (Dagster's own open says so)."""
    path, found = home / "dagster.yaml", set[str]()
    try:
        todo: list[Any] = [yaml.safe_load(path.read_text())] if path.is_file() else []
    except yaml.YAMLError:
        return found
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if isinstance(env := node.get("env"), str) and len(node) == 1:
                found.add(env)
            todo += node.values()
        elif isinstance(node, list):
            todo += node
    return found
