"""The sensors through `build_sensor_context` on the test's instance: partitions follow the
sources file, the tier sensor requests only due tiers and backs off a failing source, a
version bump requests one re-index run per source, and that run re-indexes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.config import ConfigError, TierPolicy
from freshness_pipeline.core.cadence import HOUR, Due, due
from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.defs.resources import FreshnessResource
from freshness_pipeline.defs.sensors import (
    PARTITION_TAG,
    REINDEX_TAG,
    sources_partitions_sensor,
    tier_cadence_sensor,
    version_bump_sensor,
)
from freshness_pipeline.defs.tags import TIER_TAG
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import SOURCE, check_result, refresh, write_sources
from freshness_pipeline_tests.sitegen import generate


def evaluate(sensor: dg.SensorDefinition, instance: dg.DagsterInstance, cursor: str | None = None):
    with (
        dg.build_sensor_context(  # a context manager: the resource closes its store after the tick
            instance=instance, cursor=cursor, definitions=defs, resources={"freshness": FreshnessResource()}
        ) as ctx,
        dg.partition_loading_context(dynamic_partitions_store=instance),  # as the daemon does
    ):
        return sensor.evaluate_tick(ctx)


def test_partitions_follow_the_sources_file(sources: Path, site: DocsSite, instance: dg.DagsterInstance) -> None:
    data = yaml.safe_load(sources.read_text())
    data["sources"].append({"name": "api", "sitemap": site.sitemap_url})
    sources.write_text(yaml.safe_dump(data))
    instance.add_dynamic_partitions("sources", ["retired"])  # no longer in the file

    tick = evaluate(sources_partitions_sensor, instance)
    (request,) = tick.dynamic_partitions_requests
    assert request.partition_keys == ["api"]  # docs exists already; retired is kept
    instance.add_dynamic_partitions("sources", request.partition_keys)
    assert set(instance.get_dynamic_partitions("sources")) == {SOURCE, "api", "retired"}
    assert evaluate(sources_partitions_sensor, instance).skip_message


def add_run(instance: dg.DagsterInstance, tier: str | None, status: dg.DagsterRunStatus) -> None:
    tags = {PARTITION_TAG: SOURCE, **({TIER_TAG: tier} if tier else {})}
    instance.add_run(dg.DagsterRun(job_name="refresh", run_id=str(uuid.uuid4()), tags=tags, status=status))


WAITS = f"{SOURCE}: no tier is due"


def test_the_first_tier_tick_sees_the_sources_before_their_partitions_exist(
    sources: Path, site: DocsSite, dagster_home: Path
) -> None:
    """No partition yet (sources_partitions_sensor has not ticked): the first tick adds them
    and requests each source's first run, instead of `skipped: no source`."""
    data = yaml.safe_load(sources.read_text())
    data["sources"].append({"name": "api", "sitemap": site.sitemap_url})
    sources.write_text(yaml.safe_dump(data))
    with (
        dg.DagsterInstance.get() as instance,
        dg.build_sensor_context(  # with the instance's ref, as the daemon gives it
            instance=instance,
            instance_ref=instance.get_ref(),
            definitions=defs,
            resources={"freshness": FreshnessResource()},
        ) as ctx,
        dg.partition_loading_context(dynamic_partitions_store=instance),
    ):
        tick = tier_cadence_sensor.evaluate_tick(ctx)
        (added,) = tick.dynamic_partitions_requests
        assert sorted(added.partition_keys) == ["api", SOURCE]
        assert sorted(r.partition_key for r in tick.run_requests) == ["api", SOURCE], tick.skip_message
        assert all(not r.tags.get("freshness/tier") for r in tick.run_requests)  # a first run is a full one


def test_tier_sensor_requests_only_due_tiers(sources: Path, site: DocsSite, instance: dg.DagsterInstance) -> None:
    write_sources(sources, site.sitemap_url, tiers={"hot_every_h": 0.0, "warm_every_h": 24, "cold_every_h": 168})
    # Never refreshed: one full run (every tier at once).
    (first,) = evaluate(tier_cadence_sensor, instance).run_requests
    assert first.partition_key == SOURCE and TIER_TAG not in first.tags

    # After a full run only hot (interval 0) is due.
    add_run(instance, None, dg.DagsterRunStatus.SUCCESS)
    (hot,) = evaluate(tier_cadence_sensor, instance).run_requests
    assert hot.tags[TIER_TAG] == "hot" and hot.job_name in (None, "refresh")
    assert hot.run_key.startswith(f"{SOURCE}:hot:")

    # A refresh in flight: nothing is launched beside it.
    add_run(instance, "hot", dg.DagsterRunStatus.STARTED)
    assert evaluate(tier_cadence_sensor, instance).skip_message == f"{SOURCE}: a refresh is queued or running"


def test_a_failed_or_canceled_refresh_does_not_cover_its_tier(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    write_sources(sources, site.sitemap_url, tiers={"hot_every_h": 4, "warm_every_h": 24, "cold_every_h": 168})
    (first,) = evaluate(tier_cadence_sensor, instance).run_requests
    assert first.run_key == f"{SOURCE}:all:0"

    # The full run fails: still due, under a new run key (the daemon drops a repeated key).
    add_run(instance, None, dg.DagsterRunStatus.FAILURE)
    (retry,) = evaluate(tier_cadence_sensor, instance).run_requests
    assert TIER_TAG not in retry.tags and retry.run_key == f"{SOURCE}:all:0:retry1"
    add_run(instance, None, dg.DagsterRunStatus.CANCELED)  # a canceled one counts as failed: back off
    assert "2 failed refreshes in a row" in evaluate(tier_cadence_sensor, instance).skip_message

    # The retry is starting: nothing is launched beside it.
    add_run(instance, None, dg.DagsterRunStatus.STARTING)
    assert evaluate(tier_cadence_sensor, instance).skip_message == f"{SOURCE}: a refresh is queued or running"


def test_a_failed_tier_run_is_retried_and_a_success_covers_it(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    write_sources(sources, site.sitemap_url, tiers={"hot_every_h": 4, "warm_every_h": 24, "cold_every_h": 168})
    add_run(instance, None, dg.DagsterRunStatus.SUCCESS)
    add_run(instance, "hot", dg.DagsterRunStatus.FAILURE)  # a failure after a success
    assert evaluate(tier_cadence_sensor, instance).skip_message == WAITS  # the success covers hot


def test_a_source_that_keeps_failing_backs_off_up_to_the_cadence(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    write_sources(sources, site.sitemap_url, tiers={"hot_every_h": 0.5, "warm_every_h": 24, "cold_every_h": 168})
    add_run(instance, None, dg.DagsterRunStatus.FAILURE)
    assert evaluate(tier_cadence_sensor, instance).run_requests  # the first failure: retried at once
    add_run(instance, None, dg.DagsterRunStatus.FAILURE)
    reason = evaluate(tier_cadence_sensor, instance).skip_message
    assert reason.startswith(f"{SOURCE}: 2 failed refreshes in a row, backing off 10 min: next try after ")
    for _ in range(4):
        add_run(instance, None, dg.DagsterRunStatus.FAILURE)
    # 6 in a row would wait 160 min; the shortest cadence (hot, 30 min) caps it for a full run.
    assert "6 failed refreshes in a row, backing off 30 min" in evaluate(tier_cadence_sensor, instance).skip_message
    add_run(instance, None, dg.DagsterRunStatus.SUCCESS)  # a success ends the backoff
    assert evaluate(tier_cadence_sensor, instance).skip_message == WAITS


@pytest.mark.parametrize("sensor", [sources_partitions_sensor, tier_cadence_sensor, version_bump_sensor])
def test_a_broken_sources_file_fails_the_tick(
    sensor: dg.SensorDefinition, sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    write_sources(sources, site.sitemap_url, tiers={"rules": [{"pattern": "(", "tier": "hot"}]})
    # Raised, not a SkipReason: the daemon records a failed (red) tick with this message.
    with pytest.raises(ConfigError, match=r"source 'docs': tiers\.rules\[0\]\.pattern: not a valid regex") as err:
        evaluate(sensor, instance)
    assert str(sources) in str(err.value)


def test_due_tiers() -> None:
    policy = TierPolicy(hot_every_h=4, warm_every_h=24, cold_every_h=168).cadence()
    now = 1_000 * HOUR
    assert due({}, policy, now) == Due(None, 0.0)
    assert due({None: now - HOUR}, policy, now) is None
    assert due({None: now - 5 * HOUR}, policy, now) == Due("hot", now - 5 * HOUR)
    # hot (5h of 4h) and warm (40h of 24h) due: the most overdue goes first.
    last = {None: now - 40 * HOUR, "hot": now - 5 * HOUR}
    assert due(last, policy, now) == Due("warm", now - 40 * HOUR)
    assert due({None: now - 200 * HOUR}, policy, now) == Due(None, now - 200 * HOUR)


def test_version_bump_requests_a_reindex_run_that_reindexes(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    site.publish(generate(4, sections_per_page=2, seed=3).markdown())
    assert refresh(instance).success
    assert evaluate(version_bump_sensor, instance).skip_message == "every index is current"

    # The embedding model's dimensions change in the sources file: a new model version.
    data = yaml.safe_load(sources.read_text())
    data["embedder"]["dimensions"] = 128
    sources.write_text(yaml.safe_dump(data))
    tick = evaluate(version_bump_sensor, instance)
    (request,) = tick.run_requests
    assert request.partition_key == SOURCE and request.job_name in (None, "refresh")
    assert "embedding model hashing-v1-256 -> hashing-v1-128" in request.tags[REINDEX_TAG]
    assert json.loads(tick.cursor) == {SOURCE: request.tags[REINDEX_TAG].split(": ", 1)[1]}
    # Asked once: the next tick does not ask again.
    assert "already requested" in evaluate(version_bump_sensor, instance, tick.cursor).skip_message

    # The requested run, as the daemon launches it: the refresh job on that partition.
    reindex = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False
    )
    assert reindex.success and check_result(reindex, "change_spike").passed
    assert "version re-index" in check_result(reindex, "change_spike").description
    index_meta = [
        e.materialization.metadata
        for e in reindex.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "vector_index"
    ][0]
    assert "hashing-v1-128" in index_meta["reindex_reason"].value
    # No page is new: no section is new either; every section is written to the new index.
    counts = {k: index_meta[k].value for k in ("new", "sections_new", "upserted", "sections_indexed")}
    assert counts["new"] == counts["sections_new"] == 0 and counts["upserted"] == counts["sections_indexed"] == 8
    assert evaluate(version_bump_sensor, instance, tick.cursor).skip_message == "every index is current"
