"""Stage 3, `diff_plan`: the plan against the committed manifest, with its figures."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from ..core.models import Plan
from ..core.plan import pages_losing_records, plan_refresh
from .context import SourceContext
from .sections import SectionSet


@dataclass(slots=True)
class StagedPlan:
    source: str
    plan: Plan
    sections: SectionSet
    base_generation: int
    indexed_before: int  # records in the manifest when the plan was made
    reindex_reason: str | None = None
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    previous_ids: set[str] = field(default_factory=set)
    previous_urls: set[str] = field(default_factory=set)
    removed_urls: set[str] = field(default_factory=set)  # pages that lost a record

    @property
    def stale_share(self) -> float:
        """Indexed records whose stored text no longer matches the live page."""
        # A changed section under a new key (a renamed heading) stands for a removed record.
        changed = sum(1 for s in self.plan.changed if s.id in self.previous_ids)
        stale = changed + len(self.plan.removed) + len(self.plan.moved)
        return stale / self.indexed_before if self.indexed_before else 0.0

    @property
    def change_share(self) -> float:
        """Share of the index this run would write or delete (of the larger of its size
        before and after): a mass deletion is as much a spike as a mass rewrite."""
        written = {s.id for s in self.plan.upserts}  # a changed section replaces its record
        after = self.indexed_before - len(set(self.plan.deletes)) + len(written - self.previous_ids)
        base = max(self.indexed_before, after)
        return min(1.0, (len(written) + len(self.plan.removed)) / base) if base else 0.0

    def top_pages(self, n: int = 10) -> list[tuple[str, int]]:
        touched = Counter(s.url for s in self.plan.upserts)
        return touched.most_common(n)


def make_plan(ctx: SourceContext, sections: SectionSet) -> StagedPlan:
    started = time.time()
    store, src = ctx.store, ctx.source
    state = store.sources.get(src.name)
    urls = set(sections.signatures) | set(sections.moves.values())
    previous = store.manifest.sections(src.name, urls)
    plan = plan_refresh(
        src.name,
        previous,
        sections.sections,
        fuzzy_threshold=src.noise.fuzzy_threshold,
        page_moves=sections.moves,
        seen_month=time.strftime("%Y-%m", time.gmtime(started)),
    )
    prev_ids = {s.id for s in previous}
    touched = set(plan.deletes) | {s.id for s in [*plan.changed, *plan.payload] if s.id in prev_ids}
    staged = StagedPlan(
        source=src.name,
        plan=plan,
        sections=sections,
        base_generation=state.generation if state else 0,
        indexed_before=store.manifest.count(src.name),
        reindex_reason=sections.reindex_reason,
        previous_ids=prev_ids,
        previous_urls={s.url for s in previous},
        removed_urls=pages_losing_records(previous, plan),
    )
    staged.counts = {
        "new": len(plan.new),
        "changed": len(plan.changed),
        "moved": len(plan.moved),
        "payload_updated": len(plan.payload),
        "unchanged": staged.indexed_before - len(touched),
        "removed": len(plan.removed),
        "fuzzy_unchanged": len(plan.fuzzy),
    }
    staged.seconds = time.time() - started
    return staged
