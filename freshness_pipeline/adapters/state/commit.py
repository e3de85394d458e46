"""The manifest commit: one transaction, after the vector store writes succeeded, that
applies a plan (in batches, read as they are applied) to the manifest and records key
redirects, page signatures, change events (the outbox), the cleared intents, the new generation and the run.

A plan made against an older generation is refused (`StalePlan`) before anything is written.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

from sqlalchemy import Connection, bindparam, delete, exists, select

from ...core.models import Plan, Section
from ...core.state import ChangeEvent, SourceState
from . import schema
from .dialect import CHUNK, chunks, upsert_rows
from .section_rows import section_row
from .sources import generation, save_source
from .staging import promote_page_rows, rerun_hint


class StalePlan(RuntimeError):
    """Another commit landed on the source since the plan was made."""


def commit_plan(
    conn: Connection,
    state: SourceState,
    plans: Iterable[Plan],
    *,
    base_generation: int,
    replace_all: bool,
    signatures: Mapping[str, str | None],
    events: Iterable[ChangeEvent],
    run: Mapping[str, Any],
    staged_run: str | None = None,
) -> None:
    """Everything a commit writes, inside the caller's transaction `conn`; with
    `staged_run`, that run's staged page rows and template blocks are promoted first."""
    source, now = state.source, time.time()
    current = generation(conn, source)
    if current != base_generation:
        raise StalePlan(
            f"source {source!r}: the manifest changed since this plan was made "
            f"(generation {base_generation} -> {current}); {rerun_hint(source)}"
        )
    if replace_all:
        conn.execute(delete(schema.sections).where(schema.sections.c.source == source))
    for plan in plans:
        _apply_sections(conn, source, plan, replace_all=replace_all, now=now)
        _record_redirects(conn, source, plan, now)
    if staged_run is not None:
        if (blocks := promote_page_rows(conn, source, staged_run)) is not None:
            state.template_blocks = blocks
        _record_cut_blocks(conn, source, staged_run)
    _record_signatures(conn, source, signatures)
    _record_events(conn, source, events, now)
    conn.execute(delete(schema.pending_writes).where(schema.pending_writes.c.source == source))
    state.generation = base_generation + 1
    save_source(conn, state)
    conn.execute(schema.runs.insert(), [{"source": source, **run}])


def _apply_sections(conn: Connection, source: str, plan: Plan, *, replace_all: bool, now: float) -> None:
    """One batch of the manifest rows: removed and rewritten sections go, written ones come
    in, and those whose retrieval text did not change get their payload updated in place."""
    t = schema.sections
    if not replace_all:
        for part in chunks([*plan.deletes, *(s.id for s in plan.changed)]):
            conn.execute(delete(t).where(t.c.source == source, t.c.id.in_(part)))
    rows = [section_row(source, s, now, now) for s in [*plan.new, *plan.changed]]
    rows += [section_row(source, m.new, now, now) for m in plan.moved]
    for i in range(0, len(rows), CHUNK):
        conn.execute(t.insert(), rows[i : i + CHUNK])
    if plan.payload and not replace_all:
        _update_payload(conn, source, plan.payload, now)


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


def _record_redirects(conn: Connection, source: str, plan: Plan, now: float) -> None:
    """Old key -> new key for moved pages and renamed headings; a key that is live again
    is no longer redirected (whichever batch redirected it)."""
    t = schema.key_redirects
    if plan.key_redirects:
        rows = [{"source": source, "old_key": o, "new_key": n, "created_at": now} for o, n in plan.key_redirects]
        upsert_rows(conn, t, rows, ["source", "old_key"])
    for part in chunks({s.key for s in plan.upserts}):
        conn.execute(delete(t).where(t.c.source == source, t.c.old_key.in_(part)))


def _record_signatures(conn: Connection, source: str, signatures: Mapping[str, str | None]) -> None:
    """Each page's signature as indexed: the next run re-segments only pages whose differs."""
    if not signatures:
        return
    p = schema.pages
    conn.execute(
        p.update()
        .where(p.c.source == bindparam("b_source"), p.c.url == bindparam("b_url"))
        .values(indexed_signature=bindparam("b_sig")),
        [{"b_source": source, "b_url": u, "b_sig": sig} for u, sig in signatures.items()],
    )


def _record_cut_blocks(conn: Connection, source: str, run_id: str) -> None:
    """The template blocks each page re-segmented by `run_id` had: a re-index that must cut
    a page's kept text again strips them too (pipeline/sections.py)."""
    p, s = schema.pages, schema.staged_pages
    staged = (s.c.source == p.c.source, s.c.run_id == run_id, s.c.url == p.c.url)
    cut = exists().where(*staged, s.c.signature.is_not(None), s.c.error.is_(None))
    blocks = select(s.c.cut_blocks).where(*staged).scalar_subquery()
    conn.execute(p.update().where(p.c.source == source, cut).values(cut_blocks=blocks))


def _record_events(conn: Connection, source: str, events: Iterable[ChangeEvent], now: float) -> None:
    """The outbox: change events, delivered to webhooks after the commit."""
    rows = (
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
    while part := list(islice(rows, CHUNK)):
        conn.execute(schema.change_events.insert(), part)
