"""`freshness migrate`: an empty state store, an older one and a current one."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import create_engine, inspect

from freshness_pipeline.adapters.state.migrate import upgrade
from freshness_pipeline.config import load_settings, state_url
from freshness_pipeline.pipeline.maintenance import migrate
from freshness_pipeline_tests.test_cli import cli, write_sources

MIGRATIONS = Path(__file__).parents[2] / "freshness_pipeline" / "adapters" / "state" / "migrations" / "versions"
HEAD = max(p.name[:4] for p in MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))


def test_migrate_a_fresh_then_a_current_state(dagster_home: Path) -> None:
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    db = dagster_home / "freshness.db"
    assert not db.exists()
    out, _ = cli("migrate", "--sources", sources)
    assert out == f"state store sqlite:///{db}: migrated from an empty database to revision {HEAD}\n"
    engine = create_engine(f"sqlite:///{db}")
    assert {"sources", "pages", "sections", "runs"} <= set(inspect(engine).get_table_names())
    engine.dispose()
    out, _ = cli("migrate", "--sources", sources)
    assert out == f"state store sqlite:///{db}: already at revision {HEAD}, nothing to do\n"


def test_migrate_an_older_state(dagster_home: Path) -> None:
    settings = load_settings(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    engine = create_engine(state_url(settings))
    upgrade(engine, "0001")
    engine.dispose()
    line = migrate(settings)
    assert re.fullmatch(rf"state store sqlite:///\S+/freshness\.db: migrated from 0001 to revision {HEAD}", line), line
    assert migrate(settings).endswith(f"already at revision {HEAD}, nothing to do")
