"""The resource's state store: the first run migrates a fresh state database, once; every
step of a run (assets and checks) shares one store; a later step on an outdated schema
fails naming `freshness migrate` instead of migrating."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import text

from freshness_pipeline.adapters.state import store as store_module
from freshness_pipeline.adapters.state.migrate import current_revisions, head_revisions
from freshness_pipeline.defs.definitions import defs
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import SOURCE, materialized, refresh
from freshness_pipeline_tests.sitegen import generate


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times this process upgraded a schema and opened a state store."""
    calls = {"upgrade": 0, "migrate": 0, "opened": 0}
    real_upgrade, real_migrate, real_init = store_module.upgrade, store_module.migrate, store_module.StateStore.__init__

    def upgrade_(*args, **kw):
        calls["upgrade"] += 1
        return real_upgrade(*args, **kw)

    def migrate_(*args, **kw):
        calls["migrate"] += 1
        return real_migrate(*args, **kw)

    def init_(self, *args, **kw):
        calls["opened"] += 1
        real_init(self, *args, **kw)

    monkeypatch.setattr(store_module, "upgrade", upgrade_)
    monkeypatch.setattr(store_module, "migrate", migrate_)
    monkeypatch.setattr("freshness_pipeline.pipeline.maintenance.migrate_database", migrate_)
    monkeypatch.setattr(store_module.StateStore, "__init__", init_)
    return calls


def test_the_first_run_migrates_once_and_the_run_shares_one_store(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance, dagster_home: Path, counted: dict[str, int]
) -> None:
    site.publish(generate(3, sections_per_page=2, seed=2).markdown())
    assert not (dagster_home / "freshness.db").exists()
    first = refresh(instance)
    assert first.success
    assert counted == {"upgrade": 1, "migrate": 1, "opened": 1}  # 4 assets, their checks, the metrics
    second = refresh(instance)
    assert second.success
    # At head: the second run's migrate only reads the revision.
    assert counted == {"upgrade": 1, "migrate": 2, "opened": 2}


def test_a_later_step_on_an_outdated_schema_names_freshness_migrate(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance, dagster_home: Path
) -> None:
    site.publish(generate(2, sections_per_page=2, seed=3).markdown())
    assert refresh(instance).success
    engine = store_module.make_engine(f"sqlite:///{dagster_home / 'freshness.db'}", read_only=False)
    with engine.begin() as conn:  # as if this code were a release newer than the database
        conn.execute(text("UPDATE alembic_version SET version_num = '0002'"))
    # A run without its first stage (a re-execution from diff_plan): the step only checks.
    result = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=SOURCE, asset_selection=[dg.AssetKey("diff_plan")], raise_on_error=False
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    message = error.cause.message if error.cause else error.message  # the asset's own exception
    assert "is at schema 0002" in message and "run `freshness migrate`" in message
    assert current_revisions(engine) == {"0002"} != head_revisions()  # not migrated behind the operator's back
    assert materialized(result) == set()
    engine.dispose()


def test_a_service_key_set_when_the_definitions_loaded_and_unset_since_fails_no_run(
    sources: Path, site: DocsSite, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The definitions bind no key from the environment they were imported in: a run of a
    source that needs none succeeds whatever $OPENAI_API_KEY was at import."""
    import importlib
    import sys

    monkeypatch.setenv("OPENAI_API_KEY", "sk-set-at-import")
    monkeypatch.setenv("PINECONE_API_KEY", "pc-set-at-import")
    fresh = importlib.reload(sys.modules["freshness_pipeline.defs.definitions"]).defs
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("PINECONE_API_KEY")
    site.publish(generate(2, sections_per_page=2, seed=4).markdown())
    result = fresh.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=SOURCE, raise_on_error=False
    )
    assert result.success
