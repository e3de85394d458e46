"""Stage 3, `diff_plan`: the plan against the committed manifest, with its figures.

The plan is made a batch of pages at a time (`core.plan.plan_pages` on each) and staged
(`staged_plan`, `staged_events`, `staged_redirects`). A batch holds whole groups of pages
that the planner may pair with each other: a moved page and the page it moved to, and a
page that lost a section with the pages now holding that text (a moved or renamed
section), so the batches together make the plan one call over every page would.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Set
from dataclasses import dataclass, field

from ..adapters.state.staging import PlanRow, SectionStaging, Stage
from ..core.models import Action, FuzzyMatch, Plan, Section
from ..core.plan import pages_losing_records, plan_pages
from ..core.state import ChangeEvent
from .context import SourceContext
from .sections import SectionsReport

PLAN_BATCH = 200  # pages planned at a time (whole groups: a batch may hold more)
TOP_PAGES = 10


@dataclass(slots=True)
class PlanReport:
    """What stage 3 staged for `run_id`: the plan's counts and the figures its checks read,
    with what the index stage's run line takes from the stages before it (`crawl_counts`,
    `upstream_seconds`: the crawl's and the section stage's work)."""

    source: str
    run_id: str
    base_generation: int
    indexed_before: int  # records in the manifest when the plan was made
    reindex_reason: str | None = None
    crawl_counts: dict[str, int] = field(default_factory=dict)
    upstream_seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)  # sections: new, changed, ..., unchanged
    pages: Counter[str] = field(default_factory=Counter)  # change events by kind: new, changed, gone
    written: int = 0  # records to write (new, changed, moved)
    written_new: int = 0  # of them, ids the manifest did not hold
    deletes: int = 0  # records to delete (removed, and the old ids of moved ones)
    stale: int = 0  # indexed records whose text no longer matches the live page
    top: list[tuple[str, int]] = field(default_factory=list)  # pages by sections written
    fuzzy: list[FuzzyMatch] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def stale_share(self) -> float:
        """Indexed records whose stored text no longer matches the live page."""
        return self.stale / self.indexed_before if self.indexed_before else 0.0

    @property
    def change_share(self) -> float:
        """Share of the index this run would write or delete (of the larger of its size
        before and after): a mass deletion is as much a spike as a mass rewrite."""
        after = self.indexed_before - self.deletes + self.written_new
        base = max(self.indexed_before, after)
        return min(1.0, (self.written + self.counts.get("removed", 0)) / base) if base else 0.0

    @property
    def sections_indexed(self) -> int:
        """Records in the manifest once the plan is committed."""
        return self.indexed_before - self.deletes + self.written_new

    def top_pages(self, n: int = TOP_PAGES) -> list[tuple[str, int]]:
        return self.top[:n]


def stage_plan(ctx: SourceContext, sections: SectionsReport) -> PlanReport:
    started = time.time()
    store, src, run_id = ctx.store, ctx.source, sections.run_id
    section_staging, plan_staging = store.section_staging, store.plan_staging
    with store.locks.lock(src.name):
        store.staged_runs.require(src.name, run_id, Stage.SECTIONS)
        store.staged_runs.restart(src.name, run_id, Stage.PLAN)
        state = store.sources.get(src.name)
        report = PlanReport(
            source=src.name,
            run_id=run_id,
            base_generation=state.generation if state else 0,
            indexed_before=store.manifest.count(src.name),
            reindex_reason=sections.reindex_reason,
            crawl_counts=sections.crawl_counts,
            upstream_seconds=sections.crawl_seconds + sections.seconds,
        )
        pages = section_staging.pages(src.name, run_id)
        moves = {p.url: p.moved_to for p in pages if p.moved_to}
        gone = sorted(p.url for p in pages if p.error is None and p.signature is None)
        gone_pages = set(gone)
        urls = {p.url for p in pages if p.error is None} | set(moves.values())
        tally = _Tally(report)
        month = time.strftime("%Y-%m", time.gmtime(started))
        for batch in _batches(section_staging, src.name, run_id, urls, moves):
            previous = store.manifest.sections(src.name, batch)
            current = section_staging.sections(src.name, run_id, batch)
            plan = plan_pages(
                src.name,
                previous,
                current,
                fuzzy_threshold=src.noise.fuzzy_threshold,
                page_moves=moves,
                seen_month=month,
            )
            plan_staging.add_rows(src.name, run_id, _rows(plan, previous, current))
            plan_staging.add_redirects(src.name, run_id, plan.key_redirects)
            plan_staging.add_events(src.name, run_id, tally.add(plan, previous, gone_pages))
        plan_staging.add_events(src.name, run_id, tally.gone(gone))
        tally.close()
        report.seconds = time.time() - started
        store.staged_runs.finish(src.name, run_id, Stage.PLAN)
    return report


def changed_sample(ctx: SourceContext, report: PlanReport, n: int) -> list[tuple[str, str]]:
    """(indexed text, new text) of up to `n` sections the plan rewrites in place."""
    changed: list[Section] = []
    for batch in ctx.store.plan_staging.rows(ctx.name, report.run_id, [Action.CHANGED]):
        changed += [s for _, s in batch if s is not None]
        if len(changed) >= n:
            break
    old = {s.id: s.text for s in ctx.store.manifest.by_id(ctx.name, [s.id for s in changed[:n]])}
    return [(old[s.id], s.text) for s in changed[:n] if s.id in old]


class _Tally:
    """Sums the batches' plans into the report; returns each batch's change events."""

    def __init__(self, report: PlanReport) -> None:
        self.report = report
        self.kinds: Counter[str] = Counter()
        self.touched = 0
        self.top: Counter[str] = Counter()

    def add(self, plan: Plan, previous: list[Section], gone: Set[str]) -> list[ChangeEvent]:
        r = self.report
        prev_ids = {s.id for s in previous}
        deletes = set(plan.deletes)
        self.kinds.update(
            new=len(plan.new),
            changed=len(plan.changed),
            moved=len(plan.moved),
            payload_updated=len(plan.payload),
            removed=len(plan.removed),
            fuzzy_unchanged=len(plan.fuzzy),
        )
        self.touched += len(deletes) + sum(1 for s in [*plan.changed, *plan.payload] if s.id in prev_ids)
        written = {s.id for s in plan.upserts}
        r.written += len(written)
        r.written_new += len(written - prev_ids)
        r.deletes += len(deletes)
        r.stale += sum(1 for s in plan.changed if s.id in prev_ids) + len(plan.removed) + len(plan.moved)
        r.fuzzy += plan.fuzzy
        self.top.update(s.url for s in plan.upserts)
        events = change_events(plan.upserts, pages_losing_records(previous, plan), {s.url for s in previous}, gone)
        r.pages.update(e.kind for e in events)
        return events

    def gone(self, urls: list[str]) -> list[ChangeEvent]:
        self.report.pages["gone"] += len(urls)
        return gone_events(urls)

    def close(self) -> None:
        r = self.report
        r.counts = {
            k: self.kinds[k]
            for k in ("new", "changed", "moved", "payload_updated", "unchanged", "removed", "fuzzy_unchanged")
        }
        r.counts["unchanged"] = r.indexed_before - self.touched
        r.top = self.top.most_common(TOP_PAGES)


def change_events(
    upserts: Iterable[Section], removed_urls: Set[str], previous_urls: Set[str], gone: Set[str]
) -> list[ChangeEvent]:
    """One event per page that gained, changed or lost a record, new or changed (with its
    written sections' keys); `gone` pages are left out (`gone_events` tells them)."""
    touched: dict[str, list[Section]] = {}
    for s in upserts:
        touched.setdefault(s.url, []).append(s)
    events = []
    for url in sorted(touched.keys() | removed_urls):
        if url in gone:
            continue
        kind = "changed" if url in previous_urls else "new"
        secs = touched.get(url, [])
        page_hash = secs[0].content_hash if len(secs) == 1 else None
        events.append(ChangeEvent(url, kind, page_hash, tuple(sorted({s.key for s in secs}))))
    return events


def gone_events(urls: Iterable[str]) -> list[ChangeEvent]:
    return [ChangeEvent(url, "gone", None, ()) for url in urls]


def _rows(plan: Plan, previous: list[Section], current: list[Section]) -> Iterator[PlanRow]:
    """The plan as staged rows: every current section with its action and settled date,
    and every record to delete. A payload update that keeps the indexed retrieval text
    (a fuzzy-unchanged edit: the staged section holds the new one) is `fuzzy`: the commit
    takes that text and its hashes from the manifest."""
    by_id = {s.id: s for s in previous}
    staged_hash = {s.id: s.content_hash for s in current}
    action = {s.id: Action.NEW for s in plan.new}
    action |= {s.id: Action.CHANGED for s in plan.changed}
    action |= {s.id: Action.PAYLOAD if s.content_hash == staged_hash[s.id] else Action.FUZZY for s in plan.payload}
    moved_from = {m.new.id: by_id[m.old_id] for m in plan.moved}
    for s in plan.current:
        old = moved_from.get(s.id)
        if old is not None:
            yield PlanRow(s.id, Action.MOVED, s.url, s.as_of, old.id, old.url)
        else:
            yield PlanRow(s.id, action.get(s.id, Action.UNCHANGED), s.url, s.as_of)
    for record_id in plan.removed:
        yield PlanRow(record_id, Action.REMOVED, by_id[record_id].url)


def _batches(
    staging: SectionStaging, source: str, run_id: str, urls: Iterable[str], moves: dict[str, str]
) -> Iterator[list[str]]:
    """The pages to plan, in batches of whole groups (see the module's docstring)."""
    parent = {u: u for u in urls}

    def root(u: str) -> str:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    def join(a: str, b: str) -> None:
        if a in parent and b in parent:
            parent[root(a)] = root(b)

    for old, new in moves.items():
        join(old, new)
    lost: dict[str, set[str]] = defaultdict(set)  # retrieval text -> pages that lost it
    for url, content_hash in staging.gone_sections(source, run_id, list(parent)):
        lost[content_hash].add(url)
    first: dict[str, tuple[str, int, int]] = {}
    for url, ordinal, chunk, content_hash, fresh in staging.sections_with_hashes(source, run_id, list(lost)):
        if fresh:  # a new record that may take the lost one's vector
            for other in lost[content_hash]:
                join(other, url)
        first[content_hash] = min(first.get(content_hash, (url, ordinal, chunk)), (url, ordinal, chunk))
    for content_hash, (url, _, _) in first.items():  # where a lost key is redirected to
        for other in lost[content_hash]:
            join(other, url)
    groups: dict[str, list[str]] = defaultdict(list)
    for u in sorted(parent):
        groups[root(u)].append(u)
    batch: list[str] = []
    for members in groups.values():
        batch += members
        if len(batch) >= PLAN_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
