"""The schema of a state database, with Alembic: brought to the newest explicitly (once at
the start of a refresh, or `freshness migrate`), checked on every open, never changed by one.

A database at head is recognised without importing Alembic (a third of a second of every
command and run that opens a store): the head is a constant (`test_migrate.py` holds it to
the scripts) and the database's revision is one read of Alembic's `alembic_version` table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text

from ..damage import SchemaOutdated

if TYPE_CHECKING:
    from alembic.config import Config

_HERE = Path(__file__).parent
MIGRATE = "`freshness migrate`"
OR_RUN = "(or `freshness run`, which migrates first)"
HEAD = frozenset({"0012"})  # the newest migration's `revision`
VERSION_TABLE = "alembic_version"  # Alembic's default, where it keeps a database's revision


def alembic_config(engine: Engine | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE / "migrations"))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(engine), revision)


def head_revisions() -> frozenset[str]:
    """The newest revisions this code knows."""
    return HEAD


def script_revisions() -> set[str]:
    """Every revision of the migration scripts (Alembic reads them)."""
    from alembic.script import ScriptDirectory

    return {r.revision for r in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def current_revisions(engine: Engine) -> frozenset[str]:
    """The revisions the database is at (empty: never migrated). Reads only."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return frozenset()
        return frozenset(row[0] for row in conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")))


def require_head(engine: Engine, where: str) -> None:
    """Raise `SchemaOutdated` (naming the way out) unless the database at `where` is at head."""
    current, heads = current_revisions(engine), head_revisions()
    if current == heads:
        return
    if not current:
        raise SchemaOutdated(f"{where} has no state schema yet: run {MIGRATE} {OR_RUN}")
    if not current <= script_revisions():
        raise SchemaOutdated(
            f"{where} is at schema {', '.join(sorted(current))}, newer than this code knows "
            f"({', '.join(sorted(heads))}): upgrade freshness_pipeline"
        )
    raise SchemaOutdated(
        f"{where} is at schema {', '.join(sorted(current))}, this code needs {', '.join(sorted(heads))}: "
        f"run {MIGRATE} {OR_RUN}"
    )
