"""The state store: one SQLAlchemy engine on the state database and the repositories on it.

SQLite by default, the same code on Postgres through a SQLAlchemy URL. Opening a store
checks the schema and never changes it: `migrate` brings a database to the newest schema
(once at the start of a refresh, and `freshness migrate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import StaticPool

from ..damage import DamagedState, SchemaOutdated
from . import schema
from .beats import StepBeats
from .engine import make_engine, parse_url
from .intents import Intents
from .locks import Locks, SourceBusy
from .manifest import Manifest
from .metrics_store import MetricsStore
from .migrate import MIGRATE, OR_RUN, current_revisions, head_revisions, require_head, upgrade
from .pages import Pages
from .runs import RunLog
from .sources import Sources
from .staging import CrawlStaging, PlanStaging, SectionStaging, StagedRuns
from .vector_cache import VectorCache

__all__ = ["Migration", "SourceBusy", "StateStore", "migrate"]


class StateStore:
    """The state database behind one engine, as small repositories: `locks`, `sources`,
    `pages`, `manifest` (with its commit and key redirects), `vector_cache`, `intents`,
    `runs`, `metrics`, `beats` (the executing steps' heartbeats), and a run's work between
    its stages: `staged_runs` (which runs staged work), `crawl_staging`, `section_staging`
    and `plan_staging`.

    A writer needs the database at the newest schema (`SchemaOutdated`, naming
    `freshness migrate`, otherwise). `read_only`: for commands that only read (status,
    search, dump): SQLite is opened read-only (immutable when its folder is not writable),
    with no journal-mode change, so a read-only home still answers; an absent or never
    migrated database reads as an empty state (an in-memory stand-in: nothing is written),
    an older one raises `SchemaOutdated`. A damaged or unwritable database raises `DamagedState`.
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self.engine: Engine = _open_reader(url) if read_only else _open_writer(url)
        self.locks = Locks(self.engine, url)
        self.sources = Sources(self.engine)
        self.pages = Pages(self.engine)
        self.manifest = Manifest(self.engine)
        self.vector_cache = VectorCache(self.engine)
        self.intents = Intents(self.engine)
        self.runs = RunLog(self.engine)
        self.metrics = MetricsStore(self.engine)
        self.beats = StepBeats(self.engine)
        self.staged_runs = StagedRuns(self.engine)
        self.crawl_staging = CrawlStaging(self.engine)
        self.section_staging = SectionStaging(self.engine)
        self.plan_staging = PlanStaging(self.engine)

    def close(self) -> None:
        self.engine.dispose()


@dataclass(frozen=True, slots=True)
class Migration:
    """What `migrate` did: the revisions before and after (equal: nothing to do), on which
    database (its URL, the password hidden)."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    database: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def migrate(url: str) -> Migration:
    """Bring the state database to the newest schema (creating it when absent). Concurrent
    callers take turns; a database already at head costs one read of its revision."""
    if (db := _sqlite_file(url)) is not None:
        _refuse_empty(db)
        db.parent.mkdir(parents=True, exist_ok=True)
    engine = make_engine(url, read_only=False)
    try:
        with Locks(engine, url).lock("_migrate", wait=True):
            before = current_revisions(engine)
            if before != head_revisions():
                upgrade(engine)
        database = parse_url(url).render_as_string(hide_password=True)
        return Migration(tuple(sorted(before)), tuple(sorted(head_revisions())), database)
    finally:
        engine.dispose()


def describe(url: str) -> str:
    """The database as a message names it: the SQLite file, else the URL without a password."""
    db = _sqlite_file(url)
    return str(db) if db is not None else parse_url(url).render_as_string(hide_password=True)


def _sqlite_file(url: str) -> Path | None:
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database or "")


def _refuse_empty(db: Path) -> None:
    """A zero-byte file where the state database should be is one whose contents are lost
    (SQLite would read it as a new, empty database: nothing indexed)."""
    if db.is_file() and db.stat().st_size == 0:
        raise DamagedState(
            f"{db} is empty (0 bytes): the state database is lost; restore it from a backup, "
            "or delete it and run `freshness run` to index the sources again"
        )


def _open_writer(url: str) -> Engine:
    db = _sqlite_file(url)
    if db is not None and not db.is_file():  # connecting would create an empty file
        raise SchemaOutdated(f"{db} does not exist yet: run {MIGRATE} {OR_RUN}")
    if db is not None:
        _refuse_empty(db)
    engine = make_engine(url, read_only=False)
    _checked(engine, url)
    return engine


def _open_reader(url: str) -> Engine:
    db = _sqlite_file(url)
    if db is not None and not db.is_file():
        return _empty_state()
    if db is not None:
        _refuse_empty(db)
    engine = make_engine(url, read_only=True)
    if not _checked(engine, url, empty_ok=True):
        engine.dispose()
        return _empty_state()
    return engine


def _checked(engine: Engine, url: str, *, empty_ok: bool = False) -> bool:
    """True when the database is at head; False when it was never migrated and `empty_ok`.
    Otherwise raises `SchemaOutdated` (and disposes of the engine)."""
    try:
        if empty_ok and not current_revisions(engine):
            return False
        require_head(engine, describe(url))
    except Exception:
        engine.dispose()
        raise
    return True


def _empty_state() -> Engine:
    """An in-memory database with the newest tables and no rows: what a reader sees of a
    state nothing was written to yet."""
    engine = create_engine("sqlite://", poolclass=StaticPool)
    schema.metadata.create_all(engine)
    return engine
