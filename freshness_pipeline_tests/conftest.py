"""Shared fixtures: a fresh Postgres database per session (the real local server), state
store URLs for both backends, an isolated $DAGSTER_HOME per test, and the shared corpora.

The corpora (`../shared/corpora`, or `$FRESHNESS_CORPORA`) hold other projects' text and are
not in the repository. Every test that reads them takes the `corpora` fixture (and is marked
`corpus` by it): a clone without them skips those tests and says how to run them; under
`CI=true`, or when $FRESHNESS_CORPORA names a folder (.ci/run sets it), a missing corpus fails.
The synthetic replay (pipeline/test_synthetic_replay.py) proves the planner either way."""

from __future__ import annotations

import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from bench.corpora import CORPORA, corpora_root
from freshness_pipeline.defs.instance import write_instance_config
from freshness_pipeline_tests.processes import end_groups

RUN_CORPUS_TESTS = "FRESHNESS_CORPORA=/path/to/corpora python -m pytest -m corpus"
PG_ADMIN_URL = os.environ.get("FRESHNESS_TEST_PG", "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A new, empty database on the local Postgres; fails loudly when it is not running."""
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"freshness_test_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - re-raised with the fix
        pytest.fail(
            f"PostgreSQL at {PG_ADMIN_URL} is not usable ({exc}); start it with "
            "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`"
        )
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def pg_state_url(pg_url: str) -> str:
    """The session's Postgres database, emptied of what earlier tests left."""
    eng = create_engine(pg_url)
    with eng.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    eng.dispose()
    return pg_url


@pytest.fixture(params=["sqlite", "postgres"])
def any_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs against SQLite and against the real Postgres."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("pg_state_url"))


@pytest.fixture
def dagster_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An isolated $DAGSTER_HOME, on tmpfs when the machine has one: Dagster's SQLite event
    log commits every event, and on disk those fsyncs are most of a small run's time. Its
    `dagster.yaml` is the one `freshness` writes into a user's home (`defs/instance.py`)."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="freshness-test-", dir=shm if os.access(shm, os.W_OK) else None) as d:
        home = Path(d)
        write_instance_config(home)
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        yield home


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM or SIGHUP (a CI timeout, a closed terminal) ends pytest, or an xdist worker,
    without its fixtures' teardown: the process groups the tests started end first."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _end_groups_then_die)


def _end_groups_then_die(signum: int, frame: object) -> None:
    end_groups()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes `corpora` is a corpus test (`-m corpus` selects every one)."""
    for item in items:
        if "corpora" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)


def missing_corpora(root: Path) -> list[str]:
    return [name for name in CORPORA if not (root / name / "revisions.json").is_file()]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def corpora() -> Path:
    """The corpora's folder; the one skip-or-fail rule for every test that reads them."""
    root = corpora_root()
    missing = missing_corpora(root)
    if not missing:
        return root
    why = f"corpus test: no {', '.join(missing)} corpus under {root} (each with revisions.json and r0..r9/)"
    if in_ci() or os.environ.get("FRESHNESS_CORPORA"):
        pytest.fail(f"{why}; under CI or a set FRESHNESS_CORPORA it must run: point it at them", pytrace=False)
    pytest.skip(f"{why}; run it with `{RUN_CORPUS_TESTS}`")
