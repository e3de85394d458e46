"""The code location: `dagster dev` / `dg dev` in the repo root load `defs` from here.

Add new assets, checks or sensors to the lists below."""

import os

import dagster as dg

from .assets import refresh_assets, refresh_job
from .checks import refresh_checks
from .metrics_assets import freshness_metrics
from .resources import FreshnessResource
from .sensors import refresh_sensors

assets: list = [*refresh_assets, freshness_metrics]
asset_checks: list = [*refresh_checks]
sensors: list = [*refresh_sensors]
jobs: list = [refresh_job]

defs = dg.Definitions(
    assets=assets,
    asset_checks=asset_checks,
    sensors=sensors,
    jobs=jobs,
    resources={
        "freshness": FreshnessResource(
            # An EnvVar must be set when the run starts: bound only for the keys that are.
            **{
                f: dg.EnvVar(var)
                for f, var in (("openai_api_key", "OPENAI_API_KEY"), ("pinecone_api_key", "PINECONE_API_KEY"))
                if os.environ.get(var)
            }
        ),
        # Outputs under the running instance's storage dir: $DAGSTER_HOME/storage.
        "io_manager": dg.FilesystemIOManager(),
    },
)
