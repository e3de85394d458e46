"""The schema of the state database, on SQLite and on the real local Postgres: the
migrations create exactly `schema.py`'s tables; opening a store checks the schema and never
changes it; `migrate` brings it to head once."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from freshness_pipeline.adapters.damage import SchemaOutdated
from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.migrate import alembic_config, current_revisions, head_revisions, upgrade
from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.core.state import SourceState


def test_the_migrations_create_what_schema_py_declares(any_state_url: str) -> None:
    engine = create_engine(any_state_url)
    upgrade(engine)
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), schema.metadata)
    names = set(inspect(engine).get_table_names())
    engine.dispose()
    assert diffs == []
    assert names == set(schema.metadata.tables) | {"alembic_version"}


def test_the_head_constant_is_the_head_of_the_migration_scripts() -> None:
    """`HEAD` spares every open an Alembic import; a new migration must move it."""
    assert head_revisions() == frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


def test_the_revision_read_without_alembic_is_alembics(any_state_url: str) -> None:
    engine = create_engine(any_state_url)
    assert current_revisions(engine) == frozenset()  # no alembic_version table yet
    for revision in ("0002", "head"):
        upgrade(engine, revision)
        with engine.connect() as conn:
            assert current_revisions(engine) == frozenset(MigrationContext.configure(conn).get_current_heads())
    engine.dispose()


def test_migrate_creates_the_database_and_then_has_nothing_to_do(any_state_url: str) -> None:
    first = migrate(any_state_url)
    assert first.changed and first.before == () and set(first.after) == head_revisions()
    again = migrate(any_state_url)
    assert not again.changed and again.before == again.after


def test_a_writer_on_an_unmigrated_database_names_freshness_migrate(any_state_url: str) -> None:
    if any_state_url.startswith("sqlite"):
        with pytest.raises(SchemaOutdated, match=r"does not exist yet: run `freshness migrate`"):
            StateStore(any_state_url)
        assert not Path(any_state_url.removeprefix("sqlite:///")).exists()  # not made by the open
    else:
        with pytest.raises(SchemaOutdated, match=r"has no state schema yet: run `freshness migrate`"):
            StateStore(any_state_url)


def test_an_older_schema_is_named_and_left_as_it_is(any_state_url: str) -> None:
    engine = create_engine(any_state_url)
    upgrade(engine, "0002")
    for read_only in (False, True):
        with pytest.raises(SchemaOutdated, match=r"is at schema 0002, this code needs .*run `freshness migrate`"):
            StateStore(any_state_url, read_only=read_only)
    assert current_revisions(engine) == {"0002"}  # neither open migrated
    engine.dispose()
    migrate(any_state_url)
    store = StateStore(any_state_url, read_only=True)
    assert store.sources.get("docs") is None
    store.close()


def test_a_schema_newer_than_the_code_says_so(any_state_url: str) -> None:
    migrate(any_state_url)
    engine = create_engine(any_state_url)
    with engine.begin() as conn:  # as a later release's migration would leave it
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaOutdated, match="newer than this code knows"):
        StateStore(any_state_url)


def test_a_reader_of_a_database_never_written_sees_an_empty_state(any_state_url: str) -> None:
    store = StateStore(any_state_url, read_only=True)
    try:
        assert store.sources.names() == [] and store.manifest.count("docs") == 0
        assert store.metrics.weak_queries() == []
    finally:
        store.close()
    if any_state_url.startswith("sqlite"):
        assert not Path(any_state_url.removeprefix("sqlite:///")).exists()  # nothing written
    else:
        engine = create_engine(any_state_url)
        assert current_revisions(engine) == frozenset() and inspect(engine).get_table_names() == []
        engine.dispose()


def test_a_reader_reads_what_a_writer_wrote(any_state_url: str) -> None:
    migrate(any_state_url)
    writer = StateStore(any_state_url)
    writer.sources.save(SourceState("docs", "n1", "c1", "m", 4))
    writer.close()
    reader = StateStore(any_state_url, read_only=True)
    assert reader.sources.names() == ["docs"]
    reader.close()
