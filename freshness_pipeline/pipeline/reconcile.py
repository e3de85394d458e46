"""Reconcile: does the vector store hold exactly what the manifest says? Ids and content
hashes of the active namespace against the manifest rows; `fix` repairs the difference
from the manifest and the embedding cache (embedding only what the cache lacks).

Runs as the `reconcile_clean` asset check after every index write and as
`freshness reconcile`. It holds the source's lock (waiting for a running refresh), so it
never mistakes a refresh's writes in flight for drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .context import SourceContext, namespace
from .indexing import restore_from_manifest


@dataclass(slots=True)
class ReconcileReport:
    orphans: list[str] = field(default_factory=list)  # in the store, not in the manifest
    missing: list[str] = field(default_factory=list)  # in the manifest, not in the store
    mismatched: list[str] = field(default_factory=list)  # in both, with different content hashes
    fixed: int = 0  # records deleted or re-upserted by `fix`
    source: str = ""
    namespace: str = ""
    records: int = 0  # rows in the manifest

    @property
    def clean(self) -> bool:
        return not (self.orphans or self.missing or self.mismatched)

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
        }


def reconcile(ctx: SourceContext, *, fix: bool = False) -> ReconcileReport:
    """What differs between the manifest and the active namespace (before any fix)."""
    report = ReconcileReport(source=ctx.name)
    with ctx.store.lock(ctx.name, wait=True):
        state = ctx.store.source_state(ctx.name)
        if state is None or state.generation == 0:
            return report  # nothing was ever indexed
        report.namespace = namespace(ctx.name, state.active_version)
        manifest = ctx.store.manifest_hashes(ctx.name)
        held = ctx.vectors.list_hashes(report.namespace)
        report.records = len(manifest)
        report.orphans = sorted(held.keys() - manifest.keys())
        report.missing = sorted(manifest.keys() - held.keys())
        report.mismatched = sorted(i for i in manifest.keys() & held.keys() if held[i] != manifest[i])
        if fix and not report.clean:
            deleted, upserted = restore_from_manifest(
                ctx, state, [*report.orphans, *report.missing, *report.mismatched]
            )
            report.fixed = deleted + upserted
    return report
