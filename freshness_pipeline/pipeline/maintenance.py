"""Operator chores on the state store: bringing its schema to the newest revision
(Alembic, `adapters/state/migrate.py`), and checking that a run can write its home.

Opening a store never migrates (it checks, and names `freshness migrate` when behind). This
runs once at the start of every refresh (`fetched_pages`) and behind `freshness migrate`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..adapters.damage import DamagedState
from ..adapters.state.store import migrate as migrate_database
from ..config import Settings, state_url


def require_writable_home(home: Path) -> None:
    """A run writes Dagster's storage (and by default the state) under `$DAGSTER_HOME`: one
    it cannot write is one `DamagedState` line before the run starts, not a traceback from
    Dagster's first write. A home not made yet is judged by the folder it will be made in."""
    where = home
    while not where.exists() and where.parent != where:
        where = where.parent
    for folder in (where, where / "history"):
        if not folder.is_dir():
            continue
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as exc:
            raise DamagedState(
                f"{folder}: cannot write the state ({exc.strerror or exc}): make {home} writable for this "
                "user, or run the command as its owner (status, search and dump only read)"
            ) from None


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
