"""The staged plan as the commit protocol reads it, batch by batch: what to upsert, update
in place and delete, the intents naming all of it, and the manifest changes to commit.

A re-index writes every current section (and the indexed sections of pages that failed to
segment: a re-index never drops a page for a bad minute) into the next index version.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace

from ..adapters.state.staging import PlanRow, Stage, StagedPage
from ..core.models import CURRENT_ACTIONS, PAYLOAD_ACTIONS, TOUCHED_ACTIONS, UPSERT_ACTIONS, Action, Move, Plan, Section
from .context import SourceContext
from .planning import PlanReport


@dataclass
class PlanReader:
    """One run's staged plan (named by `report`), read for the index stage."""

    ctx: SourceContext
    report: PlanReport

    def __post_init__(self) -> None:
        self.plan_staging = self.ctx.store.plan_staging
        self.reindex = self.report.reindex_reason is not None
        self._pages: list[StagedPage] | None = None

    def require(self) -> None:
        """Raises `StagingGone` when this run's staged plan is gone."""
        src, run = self.ctx.name, self.report.run_id
        self.ctx.store.staged_runs.require(src, run, Stage.PLAN)
        self._pages = self.ctx.store.section_staging.pages(src, run)

    @property
    def errors(self) -> list[str]:
        """Pages that could not be segmented this run (their sections stay as they are)."""
        return [p.url for p in self._pages or [] if p.error is not None]

    def signatures(self) -> dict[str, str | None]:
        """Page -> signature of its sections once committed (None: they are gone)."""
        return {p.url: p.signature for p in self._pages or [] if p.error is None}

    def upserts(self) -> Iterator[list[Section]]:
        actions = CURRENT_ACTIONS if self.reindex else UPSERT_ACTIONS
        for batch in self.plan_staging.rows(self.ctx.name, self.report.run_id, actions):
            yield [s for _, s in batch if s is not None]
        if self.reindex and self.errors:  # dated as they were indexed
            yield self.ctx.store.manifest.sections(self.ctx.name, self.errors)

    def payload(self) -> Iterator[list[Section]]:
        """The payload updates (no re-index), each as its record will read: a `fuzzy` one
        with the hash of what its vector was made from, and the live retrieval text (what a
        full-text search reads follows what the record shows)."""
        if not self.reindex:
            for batch in self.plan_staging.rows(self.ctx.name, self.report.run_id, PAYLOAD_ACTIONS):
                live = {s.id: s.embed_text for _, s in batch if s is not None}
                yield [replace(s, embed_text=live[s.id]) for s in self._as_indexed(batch)]

    def _as_indexed(self, batch: list[tuple[PlanRow, Section | None]]) -> list[Section]:
        """The batch's sections; a `fuzzy` one with the retrieval text, hash and simhash its
        manifest row holds (what its vector was made from), as the plan compared it: the
        manifest keeps them, so later edits are compared with what was embedded."""
        kept = [row.id for row, s in batch if row.action is Action.FUZZY and s is not None]
        indexed = {s.id: s for s in self.ctx.store.manifest.by_id(self.ctx.name, kept)} if kept else {}
        out: list[Section] = []
        for row, s in batch:
            if s is None:
                continue
            if row.action is Action.FUZZY:
                old = indexed[row.id]
                s = replace(
                    s, embed_text=old.embed_text, content_hash=old.content_hash, simhash=old.simhash, tokens=old.tokens
                )
            out.append(s)
        return out

    def deletes(self) -> Iterator[list[str]]:
        if not self.reindex:
            for batch in self.plan_staging.rows(self.ctx.name, self.report.run_id, [Action.REMOVED, Action.MOVED]):
                ids = (row.old_id if row.action is Action.MOVED else row.id for row, _ in batch)
                yield [i for i in ids if i is not None]  # a moved row always names its old record

    def touched(self) -> Iterator[list[str]]:
        """Every record id this run writes or deletes, for the write-ahead intents."""
        actions = CURRENT_ACTIONS if self.reindex else TOUCHED_ACTIONS
        yield from self.plan_staging.ids(self.ctx.name, self.report.run_id, actions, old=not self.reindex)
        if self.reindex and self.errors:
            yield [s.id for s in self.ctx.store.manifest.sections(self.ctx.name, self.errors)]

    def owns(self, ids: Collection[str]) -> set[str]:
        """Which of `ids` this run writes or deletes itself."""
        actions = CURRENT_ACTIONS if self.reindex else TOUCHED_ACTIONS
        own = self.plan_staging.named(self.ctx.name, self.report.run_id, ids, actions, old=not self.reindex)
        if self.reindex and self.errors:
            own |= {s.id for s in self.ctx.store.manifest.sections(self.ctx.name, self.errors)} & set(ids)
        return own

    def manifest_changes(self) -> Iterator[Plan]:
        """The plan in batches for the manifest commit (a re-index: every record, as new)."""
        src = self.ctx.name
        if self.reindex:
            for part in self.upserts():
                yield Plan(source=src, new=part)
        else:
            for batch in self.plan_staging.rows(src, self.report.run_id, TOUCHED_ACTIONS):
                plan = Plan(source=src)
                plan.payload = self._as_indexed([(row, s) for row, s in batch if row.action in PAYLOAD_ACTIONS])
                for row, s in batch:
                    if row.action is Action.REMOVED:
                        plan.removed.append(row.id)
                    elif row.action is Action.MOVED and s is not None:
                        plan.moved.append(Move(old_id=row.old_id or "", new=s))
                    elif s is not None and row.action not in PAYLOAD_ACTIONS:
                        {Action.NEW: plan.new, Action.CHANGED: plan.changed}[row.action].append(s)
                yield plan
        yield Plan(source=src, key_redirects=self.plan_staging.redirects(src, self.report.run_id))

    def current_hashes(self, urls: Collection[str]) -> dict[str, str]:
        """Record id -> content hash of these pages' current sections (no re-segmenting)."""
        return self.ctx.store.section_staging.section_hashes(self.ctx.name, self.report.run_id, urls)

    def drop(self) -> None:
        self.ctx.store.staged_runs.drop(self.ctx.name, self.report.run_id)
