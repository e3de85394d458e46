"""Run by test_broker_refused.py in a process of its own (the executor is chosen when the code
location loads): one refresh under the Celery executor its environment names, executed as a
run worker executes it, then the summary `freshness run` prints, as JSON on the last line."""

from __future__ import annotations

import json

import dagster as dg

from freshness_pipeline.config import load_settings
from freshness_pipeline.defs.partitions import SOURCES
from freshness_pipeline.defs.run_status import ended


def refresh_job() -> dg.JobDefinition:
    from freshness_pipeline.defs.definitions import defs

    return defs.resolve_job_def("refresh")


def main() -> None:
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(SOURCES, ["docs"])
        result = dg.execute_job(
            dg.reconstructable(refresh_job), instance=instance, tags={"dagster/partition": "docs"}, raise_on_error=False
        )
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        print(json.dumps(ended(instance, load_settings(), run)))  # as the run failure sensor sees it


if __name__ == "__main__":
    main()
