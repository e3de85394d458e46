"""Dagster alone: a job of the `refresh` job's shape whose steps do nothing, run as
`freshness run` runs a refresh (`python -m bench.dagster_floor`, timed by `bench.overhead`).

Same shape: five assets on a dynamic `sources` partition, chained through Dagster's
filesystem IO manager, with the refresh's six asset checks, its six log lines, one
resource, the `embeddings` pool and the in-process executor; the command adds the
partition if it is missing, runs the job on the home's instance and reads the run's
events back. It imports nothing of freshness_pipeline, so its wall is what Dagster alone
costs a quiet refresh on this host: its import, the instance, the run's events and its step
machinery. A quiet `freshness run` beyond it is this project's own.
"""

import atexit
import gc
import json
import sys
from collections.abc import Iterator

# As the `freshness` script runs: Dagster, the definitions and the instance load with the
# collector paused, and the exit skips the final collections (`adapters/memory.py`).
gc.disable()
atexit.register(gc.freeze)
import dagster as dg  # noqa: E402

PARTITION = "floor"
sources = dg.DynamicPartitionsDefinition(name="sources")


class Nothing(dg.ConfigurableResource):
    """Stands for the refresh's one resource."""


def _check(asset: str, name: str, *, blocking: bool = False) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(name, asset=asset, blocking=blocking)


def _meta(n: int) -> dict[str, int]:
    return {f"count_{i}": i for i in range(n)}  # as many numbers as the refresh's outputs carry


@dg.asset(partitions_def=sources, check_specs=[_check("fetched_pages", "a"), _check("fetched_pages", "b")])
def fetched_pages(context: dg.AssetExecutionContext, res: Nothing) -> Iterator[dg.Output[int] | dg.AssetCheckResult]:
    context.log.info("discovery")
    context.log.info("fetch")
    context.log.info("crawled")
    yield dg.Output(0, metadata=_meta(18))
    yield dg.AssetCheckResult(check_name="a", passed=True)
    yield dg.AssetCheckResult(check_name="b", passed=True)


@dg.asset(partitions_def=sources)
def section_manifest(res: Nothing, fetched_pages: int) -> dg.Output[int]:
    return dg.Output(fetched_pages, metadata=_meta(6))


@dg.asset(partitions_def=sources, check_specs=[_check("diff_plan", "c"), _check("diff_plan", "d", blocking=True)])
def diff_plan(res: Nothing, section_manifest: int) -> Iterator[dg.Output[int] | dg.AssetCheckResult]:
    yield dg.Output(section_manifest, metadata=_meta(12))
    yield dg.AssetCheckResult(check_name="c", passed=True)
    yield dg.AssetCheckResult(check_name="d", passed=True)


@dg.asset(partitions_def=sources, pool="embeddings", check_specs=[_check("vector_index", "e")])
def vector_index(
    context: dg.AssetExecutionContext, res: Nothing, diff_plan: int
) -> Iterator[dg.Output[int] | dg.AssetCheckResult]:
    context.log.info("indexed")
    yield dg.Output(diff_plan, metadata=_meta(14))
    yield dg.AssetCheckResult(check_name="e", passed=True)


@dg.asset(partitions_def=sources, check_specs=[_check("freshness_metrics", "g")])
def freshness_metrics(
    context: dg.AssetExecutionContext, res: Nothing, diff_plan: int, vector_index: int
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    context.log.info("line")
    context.log.info("metrics")
    yield dg.MaterializeResult(metadata=_meta(10))
    yield dg.AssetCheckResult(check_name="g", passed=True)


defs = dg.Definitions(
    assets=[fetched_pages, section_manifest, diff_plan, vector_index, freshness_metrics],
    jobs=[dg.define_asset_job("refresh", selection=dg.AssetSelection.all())],
    executor=dg.in_process_executor,
    resources={"res": Nothing(), "io_manager": dg.FilesystemIOManager()},
)


def main() -> int:
    instance = dg.DagsterInstance.get()
    gc.freeze()
    gc.enable()
    if not instance.has_dynamic_partition(sources.name, PARTITION):
        instance.add_dynamic_partitions(sources.name, [PARTITION])
    result = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance,
        partition_key=PARTITION,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},  # as `freshness run`
    )
    events = instance.all_logs(result.run_id)  # counted for its test (bench's own read)
    print(json.dumps({"run_id": result.run_id, "success": result.success, "events": len(events), "seconds": 0.0}))
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
