"""The code location: `dagster dev` / `dg dev` in the repo root load `defs` from here. Add
new assets or sensors to the lists below (checks are their assets' `check_specs`).
`FRESHNESS_EXECUTOR` picks the executor (`executors.py`) and `FRESHNESS_IO_DIR` where asset
outputs are pickled (default `$DAGSTER_HOME/storage`; with workers on several machines, a
path they all mount: docs/deploy.md)."""

import os

import dagster as dg

from ..adapters.memory import collections_paused

# The location's modules load without cyclic collections, and what the process imported
# so far (Dagster's modules too) is left out of later ones (`adapters/memory.py`): a run
# worker's or a code server's start, and `freshness run`'s (docs/benchmarks.md).
with collections_paused():
    from .assets import refresh_assets, refresh_job
    from .attempts_sensor import canceled_refresh_attempts, failed_refresh_attempts
    from .executors import refresh_executor
    from .metrics_assets import freshness_metrics
    from .resources import FreshnessResource
    from .sensors import refresh_sensors
    from .source_freshness import source_fresh, source_freshness_sensor

assets: list = [*refresh_assets, freshness_metrics]
sensors: list = [*refresh_sensors, source_freshness_sensor, failed_refresh_attempts, canceled_refresh_attempts]
jobs: list = [refresh_job]

defs = dg.Definitions(
    assets=assets,
    asset_checks=[source_fresh],
    sensors=sensors,
    jobs=jobs,
    executor=refresh_executor(),
    resources={
        # The service keys are read from $OPENAI_API_KEY / $PINECONE_API_KEY when a step
        # needs them, not bound as `dg.EnvVar`s here: a binding made at import fails the
        # config of a run whose key was unset by the time it started.
        "freshness": FreshnessResource(),
        # Outputs under $FRESHNESS_IO_DIR, else the running instance's storage dir.
        "io_manager": dg.FilesystemIOManager(base_dir=os.environ.get("FRESHNESS_IO_DIR")),
    },
)
