"""The schema of a state database, with Alembic: brought to the newest explicitly (once at
the start of a refresh, or `freshness migrate`), checked on every open, never changed by one."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from ..damage import SchemaOutdated

_HERE = Path(__file__).parent
MIGRATE = "`freshness migrate`"
OR_RUN = "(or `freshness run`, which migrates first)"


def alembic_config(engine: Engine | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE / "migrations"))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    command.upgrade(alembic_config(engine), revision)


@cache
def head_revisions() -> frozenset[str]:
    """The newest revisions this code knows (read once per process)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


def current_revisions(engine: Engine) -> frozenset[str]:
    """The revisions the database is at (empty: never migrated). Reads only."""
    with engine.connect() as conn:
        return frozenset(MigrationContext.configure(conn).get_current_heads())


def require_head(engine: Engine, where: str) -> None:
    """Raise `SchemaOutdated` (naming the way out) unless the database at `where` is at head."""
    current, heads = current_revisions(engine), head_revisions()
    if current == heads:
        return
    if not current:
        raise SchemaOutdated(f"{where} has no state schema yet: run {MIGRATE} {OR_RUN}")
    known = {r.revision for r in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if not current <= known:
        raise SchemaOutdated(
            f"{where} is at schema {', '.join(sorted(current))}, newer than this code knows "
            f"({', '.join(sorted(heads))}): upgrade freshness_pipeline"
        )
    raise SchemaOutdated(
        f"{where} is at schema {', '.join(sorted(current))}, this code needs {', '.join(sorted(heads))}: "
        f"run {MIGRATE} {OR_RUN}"
    )
