"""The code location: `dagster dev` / `dg dev` in the repo root load `defs` from here.

Add new assets or sensors to the lists below (checks are their assets' `check_specs`). The deployment picks, through the
environment of the process that loads the location:

- `FRESHNESS_EXECUTOR`: `in_process` (the default: every step in the run's process),
  `multiprocess` (Dagster's default executor: a process per step) or `celery`
  (`dagster-celery`: steps go to Celery workers, `vector_index` to the `embeddings` queue);
  see `executors.py` and docs/deploy.md;
- `FRESHNESS_IO_DIR`: where asset outputs are pickled (default `$DAGSTER_HOME/storage`);
  with workers on several machines, a path they all mount.
"""

import atexit
import gc
import os

import dagster as dg

from ..adapters.memory import collections_paused

# The location's modules (the pipeline, trafilatura, httpx, the stores' clients) load
# without cyclic collections, which would walk Dagster's objects again each time: 0.1 s of
# every process that loads the location, each run worker's included.
with collections_paused():
    from . import worker_fork
    from .assets import refresh_assets, refresh_job
    from .attempts_sensor import failed_refresh_attempts
    from .executors import refresh_executor
    from .metrics_assets import freshness_metrics
    from .resources import FreshnessResource
    from .sensors import refresh_sensors
    from .source_freshness import source_fresh, source_freshness_sensor

# A process that loaded the code location (the code server, each run worker, `dagster dev`)
# exits without Python's final garbage collections, which walk every object of Dagster's
# modules: 0.4-0.5 s of each run worker's exit, which a launched `freshness run` waits for.
# The `freshness` script does the same (`cli.entry`); objects in cycles are left to the OS.
atexit.register(gc.freeze)

assets: list = [*refresh_assets, freshness_metrics]
sensors: list = [*refresh_sensors, source_freshness_sensor, failed_refresh_attempts]
jobs: list = [refresh_job]

defs = dg.Definitions(
    assets=assets,
    asset_checks=[source_fresh],
    sensors=sensors,
    jobs=jobs,
    executor=refresh_executor(),
    resources={
        # The service keys are read from $OPENAI_API_KEY / $PINECONE_API_KEY when a step
        # needs them. (Bound as `dg.EnvVar`s when set at import, a key unset by the time a
        # run started failed that run's config in the same process.)
        "freshness": FreshnessResource(),
        # Outputs under $FRESHNESS_IO_DIR, else the running instance's storage dir.
        "io_manager": dg.FilesystemIOManager(base_dir=os.environ.get("FRESHNESS_IO_DIR")),
    },
)

# In a code server (the one `freshness run` starts, and those of the daemon, the webserver
# and `dagster dev`), the run workers are forked from a copy of it made now, with all of the
# above loaded, instead of each importing it again in a fresh Python (`worker_fork.py`).
worker_fork.start_in_code_server()
