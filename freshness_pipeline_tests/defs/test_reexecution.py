"""Re-executing one asset of a run, as the UI's "re-execute selected" does: it works while
the staged work its input names is still there, and otherwise fails in one line naming
what to run instead."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.defs import assets
from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import SOURCE, materialized, refresh
from freshness_pipeline_tests.sitegen import generate

RERUN = (
    f"run the whole refresh of the source instead (the refresh job for partition '{SOURCE}', "
    f"or `freshness run --source {SOURCE}`), not one of its assets"
)


def refresh_job() -> dg.JobDefinition:
    return defs.resolve_job_def("refresh")


def reexecute(instance: dg.DagsterInstance, parent: str, step: str) -> tuple[bool, dict[str, dict], list[str]]:
    """(success, the metadata of each asset materialized, step failure messages) of
    re-executing `step` of the run `parent`."""
    options = dg.ReexecutionOptions(parent_run_id=parent, step_selection=[step])
    job = dg.reconstructable(refresh_job)
    run = instance.get_run_by_id(parent)
    assert run is not None
    tags = {k: v for k, v in run.tags.items() if not k.startswith("dagster/") or k == "dagster/partition"}
    with dg.execute_job(job, instance=instance, tags=tags, reexecution_options=options) as result:
        failures = [e.step_failure_data.error.message.strip() for e in result.get_step_failure_events()]
        done = {
            e.asset_key.to_user_string(): e.materialization.metadata for e in result.get_asset_materialization_events()
        }
        return result.success, done, failures


def test_reexecuting_the_index_step_of_a_failed_run_works(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.publish(generate(4, sections_per_page=2, seed=3).markdown())

    def unavailable(*args: object, **kwargs: object) -> None:
        raise ConnectionError("vector store unavailable")

    with monkeypatch.context() as m:
        m.setattr(assets, "apply_plan", unavailable)
        first = refresh(instance)
    assert not first.success and "vector_index" not in materialized(first)

    ok, done, failures = reexecute(instance, first.run_id, "vector_index")
    assert ok and failures == [] and set(done) == {"vector_index"}
    counts = {k: done["vector_index"][k].value for k in ("crawled", "new", "embedded")}
    assert counts == {"crawled": 4, "new": 4, "embedded": 8}


def test_reexecuting_one_step_after_another_run_started_names_what_to_run(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance
) -> None:
    site.publish(generate(4, sections_per_page=2, seed=3).markdown())
    first = refresh(instance)
    assert first.success
    # Another run of the source starts: its crawl drops every other run's staging.
    second = refresh_job().execute_in_process(
        instance=instance, partition_key=SOURCE, asset_selection=[dg.AssetKey("fetched_pages")]
    )
    assert materialized(second) == {"fetched_pages"}

    for step in ("diff_plan", "vector_index"):
        ok, done, failures = reexecute(instance, first.run_id, step)
        assert not ok and step not in done
        (message,) = failures
        assert "\n" not in message and message.endswith(RERUN), message
