"""Reconcile: does the vector store hold exactly what the manifest says? Ids and content
hashes of the active namespace against the manifest rows; `fix` repairs the difference
from the manifest and the embedding cache (embedding only what the cache lacks). A table
that cannot be read at all (a data file deleted) is rebuilt whole the same way, and a
vector store that was deleted shows as every record missing.

Runs as the `reconcile_clean` asset check after every index write and as
`freshness reconcile`. It holds the source's lock (waiting for a running refresh), so it
never mistakes a refresh's writes in flight for drift. `freshness status` uses `compare`,
without the lock (reads need no write access).

A clean comparison is remembered (`<DAGSTER_HOME>/reconciled/<source>.json`): the manifest's
digest and the store's `snapshot` of the namespace. While both are unchanged the result is
too, so a quiet run that wrote nothing neither opens nor reads the vector store, and
neither does a `freshness status` after a run whose check found the committed index clean.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..adapters.damage import REPAIR_INDEX, DamagedState
from ..config import Settings
from ..core.state import SourceState
from ..core.versions import namespace
from .context import SourceContext
from .faults import crash_point
from .records import restore_from_manifest

_ABSENT = object()


@dataclass(slots=True)
class ReconcileReport:
    orphans: list[str] = field(default_factory=list)  # in the store, not in the manifest
    missing: list[str] = field(default_factory=list)  # in the manifest, not in the store
    mismatched: list[str] = field(default_factory=list)  # in both, with different content hashes
    fixed: int = 0  # records deleted or re-upserted by `fix`
    cache_pruned: int = 0  # embedding cache rows nothing referenced, deleted by `fix`
    source: str = ""
    namespace: str = ""
    records: int = 0  # rows in the manifest
    damage: str | None = None  # the store could not be read: what is wrong and the way out

    @property
    def clean(self) -> bool:
        return not (self.orphans or self.missing or self.mismatched or self.damage)

    def summary(self) -> str:
        """One line: clean, or what differs and the way out."""
        if self.damage:
            return self.damage
        if self.clean:
            return f"{self.namespace or 'nothing indexed'}: matches the manifest ({self.records} records)"
        lost = " (the vector store lost them all)" if self.records and len(self.missing) == self.records else ""
        return (
            f"{self.namespace}: {len(self.missing)} of {self.records} records missing{lost}, "
            f"{len(self.orphans)} orphans, {len(self.mismatched)} mismatched; {REPAIR_INDEX}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "namespace": self.namespace,
            "records": self.records,
            "clean": self.clean,
            "orphans": self.orphans,
            "missing": self.missing,
            "mismatched": self.mismatched,
            "fixed": self.fixed,
            "cache_pruned": self.cache_pruned,
            "damage": self.damage,
        }


def compare(ctx: SourceContext, state: SourceState | None, *, committed: bool = False) -> ReconcileReport:
    """What differs between the manifest and the active namespace, reading only.
    `committed`: the version searches read (status, while a refresh may be writing)."""
    report = ReconcileReport(source=ctx.name)
    if state is None or state.generation == 0:
        return report  # nothing was ever indexed
    report.namespace = namespace(ctx.name, state.active_version)
    manifest = ctx.store.manifest
    digest, report.records = _digest(manifest.iter_hashes(ctx.name))
    key = f"{report.namespace}{' committed' if committed else ''}"
    seen = {"manifest": digest, "store": ctx.vectors.snapshot(report.namespace)}
    if seen["store"] is not None and _remembered(ctx.settings.home, ctx.name).get(key) == seen:
        return report  # both sides as they were at the last clean comparison
    try:
        held = ctx.vectors.list_hashes(report.namespace, committed=committed)
    except DamagedState as exc:
        report.damage = str(exc)
        return report
    # The manifest side is streamed against the store's (800,000 records: one side held, not two).
    for record_id, content_hash in manifest.iter_hashes(ctx.name):
        stored = held.pop(record_id, _ABSENT)
        if stored is _ABSENT:
            report.missing.append(record_id)
        elif stored != content_hash:
            report.mismatched.append(record_id)
    report.orphans = sorted(held)  # what the manifest did not take
    report.missing.sort()  # the database's order may be its collation's
    report.mismatched.sort()
    if report.clean and seen["store"] is not None:
        # Compared right after a commit (the `reconcile_clean` check), what committed readers
        # see is the same: `freshness status` then need not open the store either.
        also = [] if committed or not ctx.vectors.committed_is_current(report.namespace) else [f"{key} committed"]
        _remember(ctx.settings.home, ctx.name, [key, *also], seen)
    return report


def _digest(rows: Iterable[tuple[str, str]]) -> tuple[str, int]:
    """The digest of the manifest's (id, hash) rows, in id order, and how many there are."""
    digest, n = hashlib.blake2b(digest_size=16), 0
    for record_id, content_hash in rows:
        digest.update(f"{record_id}\0{content_hash}\n".encode())
        n += 1
    return digest.hexdigest(), n


def _memo_file(home: Path, source: str) -> Path:
    return home / "reconciled" / f"{hashlib.blake2b(source.encode(), digest_size=8).hexdigest()}.json"


def _remembered(home: Path, source: str) -> dict[str, dict[str, str | None]]:
    try:
        return json.loads(_memo_file(home, source).read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: compare in full


def _remember(home: Path, source: str, keys: list[str], seen: dict[str, str | None]) -> None:
    """Best effort: a read-only home just compares in full every time."""
    path = _memo_file(home, source)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(_remembered(home, source) | dict.fromkeys(keys, seen)))
        tmp.replace(path)
    except OSError:
        pass


def reconcile(ctx: SourceContext, *, fix: bool = False) -> ReconcileReport:
    """What differs between the manifest and the active namespace (before any fix)."""
    crash_point("reconcile")  # a fault test's moment: in vector_index, after its commit and output
    with ctx.store.locks.lock(ctx.name, wait=True):
        state = ctx.store.sources.get(ctx.name)
        report = compare(ctx, state)
        if not fix:
            return report
        if not (report.clean or state is None):
            if report.damage:  # unreadable: rebuilt whole from the manifest and the cache
                ctx.vectors.drop_namespace(report.namespace)
                ids: list[str] = sorted(ctx.store.manifest.hashes(ctx.name))
            else:
                ids = [*report.orphans, *report.missing, *report.mismatched]
            deleted, upserted = restore_from_manifest(ctx, state, ids)
            ctx.vectors.mark_committed(report.namespace)
            report.fixed = deleted + upserted
        # The embedding cache keeps replaced texts (a revert is free) until this prunes them.
        report.cache_pruned = ctx.store.vector_cache.prune()
    return report


def reconcile_source(settings: Settings, name: str, *, fix: bool = False) -> tuple[ReconcileReport, bool]:
    """`freshness reconcile` for one source: the report (before any fix) and whether the
    source is clean now (a fixed source is compared again)."""
    ctx = SourceContext.open(settings, name)
    try:
        report = reconcile(ctx, fix=fix)
        return report, report.clean or (fix and reconcile(ctx).clean)
    finally:
        ctx.close()
