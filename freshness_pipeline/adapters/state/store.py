"""The state store: crawl state, the manifest, key redirects, the embedding cache, runs.

SQLite by default, the same code on Postgres through a SQLAlchemy URL. The manifest only
changes in `commit`, one transaction, after the vector store writes succeeded.
"""

from __future__ import annotations

import fcntl
import hashlib
import time
from itertools import islice
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, Table, bindparam, delete, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

from ...core.models import Plan, Section
from ...core.state import ChangeEvent, PageRow, SourceState
from ..damage import DamagedState
from . import schema
from .engine import make_engine, readable_at_head, unwritable
from .migrate import upgrade
from .section_rows import section_from_row, section_row

_CHUNK = 500  # rows per statement where a list goes into an IN (...)


class SourceBusy(RuntimeError):
    """Another run holds the source's lock."""


_PAGE_FIELDS = tuple(PageRow.__dataclass_fields__)


def _chunks(items: Collection[str]) -> Iterator[list[str]]:
    seq = list(items)
    for i in range(0, len(seq), _CHUNK):
        yield seq[i : i + _CHUNK]


class StateStore:
    """All durable state of the pipeline behind one SQLAlchemy engine.

    `read_only`: for commands that only read (status, search, dump): SQLite is opened
    read-only (immutable when its folder is not writable) with no journal-mode change and
    no migration, so a read-only home still answers; an absent or older database falls
    back to the normal open. A damaged or unwritable database raises `DamagedState`.
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.read_only = False
        if read_only and readable_at_head(url):
            self.read_only = True
            self.engine: Engine = make_engine(url, read_only=True)
            return
        self.engine = make_engine(url, read_only=False)
        if self.is_sqlite:
            Path(self.engine.url.database or ".").parent.mkdir(parents=True, exist_ok=True)
        upgrade(self.engine)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def close(self) -> None:
        self.engine.dispose()

    # -- locking -------------------------------------------------------------------------

    @contextmanager
    def lock(self, source: str, *, wait: bool = False) -> Iterator[None]:
        """Exclusive per-source lock, released even when the process dies.

        Postgres: a session advisory lock (dies with the connection). SQLite: an flock on
        a file beside the database (dies with the process).
        """
        if self.is_sqlite:
            path = Path(f"{make_url(self.url).database}.{source}.lock")  # a read-only engine has no path
            try:
                fh = path.open("w")
            except OSError as exc:
                raise DamagedState(unwritable(path, exc.strerror or str(exc))) from None
            with fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    raise SourceBusy(_busy(source)) from None
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
            return
        lock_id = int.from_bytes(hashlib.sha1(source.encode()).digest()[:8], "big", signed=True)
        with self.engine.connect() as conn:
            if wait:
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": lock_id})
            elif not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_id}).scalar():
                raise SourceBusy(_busy(source))
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_id})
                conn.commit()

    # -- sources -------------------------------------------------------------------------

    def source_state(self, source: str) -> SourceState | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.sources).where(schema.sources.c.source == source)).first()
        return SourceState(**row._asdict()) if row else None

    def save_source_state(self, state: SourceState, conn: Connection | None = None) -> None:
        state.updated_at = time.time()
        if conn is None:
            with self.engine.begin() as c:
                self.upsert_rows(c, schema.sources, [asdict(state)], ["source"])
        else:
            self.upsert_rows(conn, schema.sources, [asdict(state)], ["source"])

    def source_names(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(schema.sources.c.source)).scalars())

    # -- pages ---------------------------------------------------------------------------

    def load_pages(self, source: str, *, with_markdown: bool = True) -> dict[str, PageRow]:
        names = [n for n in _PAGE_FIELDS if with_markdown or n != "markdown"]
        with self.engine.connect() as conn:
            rows = conn.execute(select(*(schema.pages.c[n] for n in names)).where(schema.pages.c.source == source))
            # zip over plain tuples: 4x faster than Row._asdict() at 10,000 pages
            return {r.url: r for r in (PageRow(**dict(zip(names, t))) for t in rows)}

    def page_markdown(self, source: str, urls: Collection[str]) -> dict[str, str]:
        return dict(self.iter_markdown(source, urls))

    def iter_markdown(self, source: str, urls: Collection[str]) -> Iterator[tuple[str, str]]:
        """(url, markdown) read by chunks of URLs, for a pass over every page's text."""
        with self.engine.connect() as conn:
            for part in _chunks(urls):
                q = select(schema.pages.c.url, schema.pages.c.markdown).where(
                    schema.pages.c.source == source, schema.pages.c.url.in_(part)
                )
                yield from ((r.url, r.markdown or "") for r in conn.execute(q))

    def save_pages(self, rows: Iterable[PageRow]) -> None:
        """Upsert page rows. A row whose `markdown` is None (loaded without it) keeps the
        stored text: only fetched content ever replaces it."""
        with_text: list[dict[str, Any]] = []
        without_text: list[dict[str, Any]] = []
        for r in rows:
            d = {name: getattr(r, name) for name in _PAGE_FIELDS}  # asdict's deep copy is slow
            if d["markdown"] is None:
                del d["markdown"]
                without_text.append(d)
            else:
                with_text.append(d)
        with self.engine.begin() as conn:
            for dicts in (with_text, without_text):
                self.upsert_rows(conn, schema.pages, dicts, ["source", "url"])

    # -- manifest ------------------------------------------------------------------------

    def manifest(self, source: str, urls: Collection[str] | None = None) -> list[Section]:
        t = schema.sections
        with self.engine.connect() as conn:
            if urls is None:
                q = select(t).where(t.c.source == source).order_by(t.c.url, t.c.ordinal)
                return [section_from_row(r) for r in conn.execute(q)]
            out: list[Section] = []
            for part in _chunks(urls):
                q = select(t).where(t.c.source == source, t.c.url.in_(part))
                out.extend(section_from_row(r) for r in conn.execute(q))
            return out

    def sections_by_id(self, source: str, ids: Collection[str]) -> list[Section]:
        t = schema.sections
        out: list[Section] = []
        with self.engine.connect() as conn:
            for part in _chunks(ids):
                out.extend(
                    section_from_row(r) for r in conn.execute(select(t).where(t.c.source == source, t.c.id.in_(part)))
                )
        return out

    def manifest_hashes(self, source: str) -> dict[str, str]:
        t = schema.sections
        with self.engine.connect() as conn:
            q = select(t.c.id, t.c.content_hash).where(t.c.source == source)
            return {r.id: r.content_hash for r in conn.execute(q)}

    def manifest_count(self, source: str) -> int:
        t = schema.sections
        with self.engine.connect() as conn:
            q = select(func.count()).select_from(t).where(t.c.source == source)
            return int(conn.execute(q).scalar_one())

    def section_by_key(self, source: str | None, key: str) -> list[Section]:
        t = schema.sections
        q = select(t).where(t.c.key == key).order_by(t.c.chunk_index)
        if source:
            q = q.where(t.c.source == source)
        with self.engine.connect() as conn:
            return [section_from_row(r) for r in conn.execute(q)]

    def resolve_key(self, source: str | None, key: str) -> tuple[str, list[str]]:
        """Follow key redirects to the current key; returns (key, the hops taken)."""
        t = schema.key_redirects
        hops: list[str] = []
        with self.engine.connect() as conn:
            while key not in hops and len(hops) < 64:
                q = select(t.c.new_key).where(t.c.old_key == key)
                if source:
                    q = q.where(t.c.source == source)
                nxt = conn.execute(q).scalar()
                if nxt is None:
                    break
                hops.append(key)
                key = nxt
        return key, hops

    # -- embedding cache -----------------------------------------------------------------

    def cached_vectors(self, model: str, dims: int, hashes: Collection[str]) -> dict[str, np.ndarray]:
        t = schema.embedding_cache
        out: dict[str, np.ndarray] = {}
        with self.engine.connect() as conn:
            for part in _chunks(set(hashes)):
                q = select(t.c.content_hash, t.c.vector).where(
                    t.c.model == model, t.c.dims == dims, t.c.content_hash.in_(part)
                )
                for r in conn.execute(q):
                    out[r.content_hash] = np.frombuffer(r.vector, dtype="<f4")
        return out

    def put_vectors(self, model: str, dims: int, vectors: Mapping[str, np.ndarray]) -> None:
        now = time.time()
        rows = [
            {
                "model": model,
                "dims": dims,
                "content_hash": h,
                "vector": np.asarray(v, dtype="<f4").tobytes(),
                "created_at": now,
            }
            for h, v in vectors.items()
        ]
        if rows:
            with self.engine.begin() as conn:
                self.insert_ignore_rows(conn, schema.embedding_cache, rows)

    # -- write-ahead intents -------------------------------------------------------------

    def add_pending(self, source: str, namespace: str, ids: Iterable[str]) -> None:
        rows = [{"source": source, "namespace": namespace, "id": i} for i in ids]
        if rows:
            with self.engine.begin() as conn:
                self.insert_ignore_rows(conn, schema.pending_writes, rows)

    def pending(self, source: str) -> dict[str, set[str]]:
        t = schema.pending_writes
        out: dict[str, set[str]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(select(t.c.namespace, t.c.id).where(t.c.source == source)):
                out.setdefault(r.namespace, set()).add(r.id)
        return out

    # -- the commit ----------------------------------------------------------------------

    def commit(
        self,
        state: SourceState,
        plans: Iterable[Plan],
        *,
        base_generation: int,
        replace_all: bool,
        signatures: Mapping[str, str | None],
        events: Iterable[ChangeEvent],
        run: Mapping[str, Any],
    ) -> None:
        """Apply a plan, given in batches (`plans`, read as they are applied), to the
        manifest in one transaction, after the index writes.

        Refuses (raises) when another commit landed since the plan was made.
        """
        source = state.source
        now = time.time()
        t = schema.sections
        with self.engine.begin() as conn:
            current = conn.execute(
                select(schema.sources.c.generation).where(schema.sources.c.source == source)
            ).scalar()
            if (current or 0) != base_generation:
                raise RuntimeError(
                    f"source {source!r}: the manifest changed since this plan was made "
                    f"(generation {base_generation} -> {current}); re-run the refresh"
                )
            if replace_all:
                conn.execute(delete(t).where(t.c.source == source))
            for plan in plans:
                self._commit_plan(conn, source, plan, replace_all=replace_all, now=now)
            p = schema.pages
            if signatures:
                conn.execute(
                    p.update()
                    .where(p.c.source == bindparam("b_source"), p.c.url == bindparam("b_url"))
                    .values(indexed_signature=bindparam("b_sig")),
                    [{"b_source": source, "b_url": u, "b_sig": sig} for u, sig in signatures.items()],
                )
            ev = (
                {
                    "source": source,
                    "url": e.url,
                    "kind": e.kind,
                    "content_hash": e.content_hash,
                    "section_keys": list(e.section_keys),
                    "created_at": now,
                }
                for e in events
            )
            while part := list(islice(ev, _CHUNK)):
                conn.execute(schema.change_events.insert(), part)
            conn.execute(delete(schema.pending_writes).where(schema.pending_writes.c.source == source))
            state.generation = base_generation + 1
            self.save_source_state(state, conn)
            conn.execute(schema.runs.insert(), [{"source": source, **run}])

    def _commit_plan(self, conn: Connection, source: str, plan: Plan, *, replace_all: bool, now: float) -> None:
        """One batch of a plan's manifest changes, inside the commit's transaction."""
        t = schema.sections
        if not replace_all:
            for part in _chunks([*plan.deletes, *(s.id for s in plan.changed)]):
                conn.execute(delete(t).where(t.c.source == source, t.c.id.in_(part)))
        rows = [section_row(source, s, now, now) for s in [*plan.new, *plan.changed]]
        rows += [section_row(source, m.new, now, now) for m in plan.moved]
        for i in range(0, len(rows), _CHUNK):
            conn.execute(t.insert(), rows[i : i + _CHUNK])
        if plan.payload and not replace_all:
            self._update_payload(conn, source, plan.payload, now)
        if plan.key_redirects:
            self.upsert_rows(
                conn,
                schema.key_redirects,
                [{"source": source, "old_key": o, "new_key": n, "created_at": now} for o, n in plan.key_redirects],
                ["source", "old_key"],
            )
        # A key that is live again is no longer redirected.
        live_keys = {s.key for s in plan.upserts}
        for part in _chunks(live_keys):
            conn.execute(
                delete(schema.key_redirects).where(
                    schema.key_redirects.c.source == source,
                    schema.key_redirects.c.old_key.in_(part),
                )
            )

    @staticmethod
    def _update_payload(conn: Connection, source: str, sections: Iterable[Section], now: float) -> None:
        """What a reader sees of sections whose retrieval text (and vector) did not change."""
        t = schema.sections
        conn.execute(
            t.update()
            .where(t.c.source == bindparam("b_source"), t.c.id == bindparam("b_id"))
            .values(text=bindparam("b_text"), title=bindparam("b_title"), as_of=bindparam("b_as_of"), indexed_at=now),
            [
                {"b_source": source, "b_id": s.id, "b_text": s.text, "b_title": s.title, "b_as_of": s.as_of}
                for s in sections
            ],
        )

    def reembed_counts(self, source: str, since: float) -> dict[str, int]:
        """Per page, how many runs since `since` re-embedded or rewrote some of its sections
        (its "changed" change events: one per page per run)."""
        t = schema.change_events
        q = (
            select(t.c.url, func.count())
            .where(t.c.source == source, t.c.kind == "changed", t.c.created_at >= since)
            .group_by(t.c.url)
        )
        with self.engine.connect() as conn:
            return {url: int(n) for url, n in conn.execute(q)}

    # -- runs ----------------------------------------------------------------------------

    def runs(self, source: str, limit: int = 20) -> list[dict[str, Any]]:
        t = schema.runs
        with self.engine.connect() as conn:
            q = select(t).where(t.c.source == source).order_by(t.c.id.desc()).limit(limit)
            return [r._asdict() for r in conn.execute(q)]

    # -- helpers -------------------------------------------------------------------------

    # One statement with many parameter sets (executemany): about 10x faster than a
    # multi-row VALUES clause, which SQLAlchemy compiles anew for every batch.

    def upsert_rows(self, conn: Connection, table: Table, rows: list[dict[str, Any]], keys: list[str]) -> None:
        if rows:
            stmt = self._dialect(conn).insert(table)
            cols = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
            conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=cols), rows)

    def insert_ignore_rows(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        if rows:
            conn.execute(self._dialect(conn).insert(table).on_conflict_do_nothing(), rows)

    @staticmethod
    def _dialect(conn: Connection) -> Any:
        return postgresql if conn.dialect.name == "postgresql" else sqlite


def _busy(source: str) -> str:
    return f"source {source!r} is being refreshed by another run; try again when it finishes"
