"""The code location: `dagster dev` / `dg dev` in the repo root load `defs` from here."""

from __future__ import annotations

import dagster as dg

from ..config import dagster_home
from .assets import refresh_assets, refresh_job
from .resources import FreshnessResource

defs = dg.Definitions(
    assets=refresh_assets,
    jobs=[refresh_job],
    resources={
        "freshness": FreshnessResource(),
        "io_manager": dg.FilesystemIOManager(base_dir=str(dagster_home() / "storage")),
    },
)
