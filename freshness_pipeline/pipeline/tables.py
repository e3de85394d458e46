"""The public API's tables (`frames.py`, `freshness dump --table`), read from the state
store as rows of core/tables.py's columns: timestamps in POSIX seconds, dates as dates,
every other value as the column's kind. Reads only; the golden set is run against the active index (as
after every refresh) without counting misses."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

from ..config import Settings
from ..core.tables import GOLDEN, GOLDEN_MISSES, HISTORY, MANIFEST, PAGES_FOR_REVIEW, RUNS, VERDICTS, WEAK, Table
from .context import SourceContext
from .golden import evaluate, golden_file, load_golden
from .history import history_values, weak_searches
from .verdicts import source_verdict

Rows = list[dict[str, Any]]


def read_all(settings: Settings, names: list[str], table: Table, **options: Any) -> tuple[Table, Rows]:
    """The rows of `table` for the sources `names` (after a `source` column), with the
    table they fill; weak searches are every source's (`options`: `days`)."""
    if table == WEAK:
        return table, weak_searches(settings, **options)
    return table.per_source(), [{"source": n, **row} for n in names for row in read(settings, n, table, **options)]


def read(settings: Settings, name: str, table: Table, **options: Any) -> Rows:
    """The rows of `table` (MANIFEST, HISTORY, GOLDEN, GOLDEN_MISSES, RUNS or
    PAGES_FOR_REVIEW) for source `name`; `options` are its reader's (a limit)."""
    ctx = SourceContext.open(settings, name, read_only=True)
    try:
        return _READERS[table.name](ctx, **options)
    finally:
        ctx.close()


def _manifest(ctx: SourceContext) -> Rows:
    """One row per section key: its chunks' hashes, dates and tokens folded."""
    sections: dict[str, list[dict[str, Any]]] = {}
    for chunk in ctx.store.manifest.summaries(ctx.name):
        sections.setdefault(chunk["key"], []).append(chunk)
    return [_section(chunks) for chunks in sections.values()]


def _section(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    first = chunks[0]
    hashes = [c["content_hash"] for c in sorted(chunks, key=lambda c: c["chunk_index"])]
    dates = [c["as_of"] for c in chunks if c["as_of"]]
    return {
        "key": first["key"],
        "url": first["url"],
        "heading_path": " > ".join(first["heading_path"]),
        "title": first["title"],
        "content_hash": hashes[0] if len(hashes) == 1 else hashlib.sha256("\n".join(hashes).encode()).hexdigest(),
        "as_of": day(max(dates)) if dates else None,
        "chunks": len(chunks),
        "tokens": sum(c["tokens"] for c in chunks),
        "changed_at": max(c["changed_at"] for c in chunks),
        "indexed_at": max(c["indexed_at"] for c in chunks),
    }


def day(as_of: str) -> datetime.date | None:
    """A section's `as_of` ("YYYY-MM-DD", or "YYYY-MM" for a month) as that day (or the
    month's first day); None when it is neither."""
    for fmt in ("%Y-%m-%d", "%Y-%m"):
        try:
            return datetime.datetime.strptime(as_of, fmt).date()
        except ValueError:
            continue
    return None


def _history(ctx: SourceContext, limit: int | None = None) -> Rows:
    return history_values(ctx.store.metrics.history(ctx.name, limit))


def _golden(ctx: SourceContext) -> Rows:
    path = golden_file(ctx.source)
    return evaluate(ctx, load_golden(path)).rows() if path else []


def _golden_misses(ctx: SourceContext) -> Rows:
    return _only(ctx.store.metrics.chronic_misses(ctx.name, at_least=0), GOLDEN_MISSES)


def _runs(ctx: SourceContext, limit: int = 20) -> Rows:
    """The `limit` latest runs, newest first: those that committed (with their counts) and,
    from the runs' own records, those that did not; each with its status and tier."""
    records = {r["run_id"]: r for r in ctx.store.runs.run_records(ctx.name, limit)}
    rows = []
    for run in ctx.store.runs.recent(ctx.name, limit):
        record = records.pop(run["run_id"], None) or {}
        status = record.get("status") if record.get("status") not in (None, "running") else "success"
        since = record.get("started_at", run["started_at"])
        rows.append((since, {**run, **run["counts"], "status": status, "tier": record.get("tier")}))
    rows += [(r["started_at"], r) for r in records.values()]
    rows.sort(key=lambda row: row[0], reverse=True)
    return _only([row for _, row in rows[:limit]], RUNS)


def _review(ctx: SourceContext) -> Rows:
    pages = ctx.store.pages.load(ctx.name, with_markdown=False).values()
    return [{"url": p.url, "why": p.flag} for p in sorted(pages, key=lambda p: p.url) if p.flag]


def _verdict(ctx: SourceContext) -> Rows:
    v = source_verdict(ctx.store, ctx.source)
    hours = None if v.age_s is None else round(v.age_s / 3600, 4)
    return [{"state": v.state, "level": v.level, "reason": v.reason, "hours_since": hours}]


def _only(rows: Rows, table: Table) -> Rows:
    return [{n: r.get(n) for n in table.names} for r in rows]


_READERS = {
    MANIFEST.name: _manifest,
    HISTORY.name: _history,
    GOLDEN.name: _golden,
    GOLDEN_MISSES.name: _golden_misses,
    RUNS.name: _runs,
    PAGES_FOR_REVIEW.name: _review,
    VERDICTS.name: _verdict,
}
