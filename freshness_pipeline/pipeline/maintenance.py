"""Operator chores on the state store: bringing its schema to the newest revision
(Alembic, `adapters/state/migrate.py`).

Opening a store never migrates (it checks, and names `freshness migrate` when behind). This
runs once at the start of every refresh (`fetched_pages`) and behind `freshness migrate`.
"""

from __future__ import annotations

from ..adapters.state.store import migrate as migrate_database
from ..config import Settings, state_url


def migrate(settings: Settings) -> str:
    """Upgrade the state store to the newest schema (creating it when absent); one line
    saying from which revision to which (or that it was already there)."""
    url = state_url(settings)
    done = migrate_database(url)
    where = done.database
    before, after = ", ".join(done.before) or "an empty database", ", ".join(done.after)
    if not done.changed:
        return f"state store {where}: already at revision {after}, nothing to do"
    return f"state store {where}: migrated from {before} to revision {after}"
