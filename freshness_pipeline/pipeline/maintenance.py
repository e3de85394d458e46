"""Operator chores on the state store: `freshness migrate` brings its schema to the newest
revision (Alembic, `adapters/state/migrate.py`)."""

from __future__ import annotations

from pathlib import Path

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from ..adapters.state.engine import make_engine
from ..adapters.state.migrate import upgrade
from ..config import Settings, state_url


def migrate(settings: Settings) -> str:
    """Upgrade the state store to the newest schema; one line saying from which revision
    to which (or that it was already there)."""
    url = state_url(settings)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database or ".").parent.mkdir(parents=True, exist_ok=True)
    engine = make_engine(url, read_only=False)
    try:
        before = _revision(engine)
        upgrade(engine)
        after = _revision(engine)
    finally:
        engine.dispose()
    where = parsed.render_as_string(hide_password=True)
    if before == after:
        return f"state store {where}: already at revision {after}, nothing to do"
    return f"state store {where}: migrated from {before or 'an empty database'} to revision {after}"


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
