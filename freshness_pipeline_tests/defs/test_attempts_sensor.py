"""A refresh that no `freshness` command waited for (a sensor's run, the UI's) is the source's
last attempt in `freshness status`: a failed one through the run failure sensor, a canceled
one through the canceled-run sensor, a successful one through the run log its commit wrote."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.defs.attempts_sensor import canceled_refresh_attempts, failed_refresh_attempts
from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.defs.partitions import sources_partitions
from freshness_pipeline.defs.resources import FreshnessResource
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.test_cli import cli, write_sources


def test_a_failed_run_no_command_waited_for_is_the_sources_last_attempt(
    dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml")  # nothing listens
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(sources_partitions.name, ["docs"])
    # What a sensor's or the UI's run does: the job in the code location, no CLI around it.
    monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
    resources = {"freshness": FreshnessResource()}
    job = defs.resolve_job_def("refresh")
    result = job.execute_in_process(instance=instance, partition_key="docs", raise_on_error=False)
    assert not result.success

    (before,) = json.loads(cli("status", "--json", "--sources", str(sources))[0])
    assert before["last_attempt"] is None  # no command recorded it

    run = instance.get_run_by_id(result.run_id)
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
    with dg.build_run_status_sensor_context(
        sensor_name=failed_refresh_attempts.name,
        dagster_instance=instance,
        dagster_run=run,
        dagster_event=failure,
        resources=resources,
    ) as context:
        failed_refresh_attempts(context.for_run_failure())

    (after,) = json.loads(cli("status", "--json", "--sources", str(sources))[0])
    assert after["last_attempt"]["status"] == "failure" and after["last_attempt"]["run_id"] == result.run_id
    assert "fetched_pages" in after["last_attempt"]["message"]
    assert after["freshness"]["not_refreshed"]


def test_a_success_launched_from_the_ui_after_a_cli_run_is_the_last_attempt(
    dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DocsSite() as site:
        site.publish(generate(2, sections_per_page=2, seed=3).markdown())
        sources = write_sources(dagster_home / "sources.yaml", site.sitemap_url)
        monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
        cli("run", "--sources", str(sources))  # the CLI records its run as the attempt
        (first,) = json.loads(cli("status", "--json", "--sources", str(sources))[0])
        assert first["last_attempt"]["status"] == "success"

        site.publish(generate(2, sections_per_page=2, seed=4).markdown())
        instance = dg.DagsterInstance.get()
        # The UI's (or a sensor's) run: the job in the code location, no CLI around it.
        result = defs.resolve_job_def("refresh").execute_in_process(instance=instance, partition_key="docs")
        assert result.success
        (after,) = json.loads(cli("status", "--json", "--sources", str(sources))[0])
    assert after["last_attempt"]["run_id"] == result.run_id != first["last_attempt"]["run_id"]
    assert after["last_attempt"]["status"] == "success"
    assert after["last_attempt"]["finished_at"] == after["last_run"]["finished_at"]


def test_a_canceled_run_is_the_sources_last_attempt(dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run canceled in the UI (here: before it started) is kept by the canceled-run sensor,
    and `freshness status` shows it as the last attempt."""
    sources = write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml")
    monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(sources_partitions.name, ["docs"])
    queued = instance.create_run_for_job(defs.resolve_job_def("refresh"), tags={"dagster/partition": "docs"})
    instance.report_run_canceled(queued)
    run = instance.get_run_by_id(queued.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.CANCELED
    (canceled,) = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_CANCELED)
    with dg.build_run_status_sensor_context(
        sensor_name=canceled_refresh_attempts.name,
        dagster_instance=instance,
        dagster_run=run,
        dagster_event=canceled.dagster_event,
        resources={"freshness": FreshnessResource()},
    ) as context:
        canceled_refresh_attempts(context)

    (after,) = json.loads(cli("status", "--json", "--sources", str(sources))[0])
    assert after["last_attempt"]["run_id"] == run.run_id
    assert (after["last_attempt"]["status"], after["last_attempt"]["message"]) == ("failure", "run CANCELED")
    text = cli("status", "--sources", str(sources))[0]
    assert text.splitlines()[0].endswith(" failure"), text
    assert "ALERT: not refreshed: the last refresh" in text and "run CANCELED" in text, text
