"""Keeping the state database itself: bringing it to the newest schema.

Opening a store never migrates (it checks, and says `freshness migrate` when behind). This
runs once at the start of every refresh (`fetched_pages`) and behind `freshness migrate`.
"""

from __future__ import annotations

from ..adapters.state.store import Migration
from ..adapters.state.store import migrate as migrate_database
from ..config import Settings, state_url


def migrate(settings: Settings) -> Migration:
    """Bring the settings' state database to the newest schema (creating it when absent);
    `Migration.changed` says whether there was anything to do."""
    return migrate_database(state_url(settings))


def migration_line(m: Migration) -> str:
    """What `freshness migrate` prints: from which revision to which, or that it was there."""
    after = ", ".join(m.after)
    if not m.changed:
        return f"state store {m.where}: already at revision {after}, nothing to do"
    return f"state store {m.where}: migrated from {', '.join(m.before) or 'an empty database'} to revision {after}"
