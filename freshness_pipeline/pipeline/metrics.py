"""Freshness metrics of one source after a run: stale share, fetch error share, content age,
embedding lag, stale retrieval rate (golden set) and the composite score, stored as a time
series.
Formulas: core/freshness.py and docs/metrics.md."""

from __future__ import annotations

import calendar
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..adapters.webhooks import Delivery
from ..core.freshness import embedding_lag, freshness_score, percentiles, section_age
from ..core.models import Outcome
from ..core.state import PageRow, SectionTimes
from .context import SourceContext
from .delivery import deliver_hooks
from .golden import GoldenRun, evaluate, golden_file, load_golden, record_misses

_DAY = 86_400.0


@dataclass(slots=True)
class FreshnessReport:
    source: str
    stale_share: float
    age_median_s: float | None
    age_p90_s: float | None
    lag_median_s: float | None
    lag_p90_s: float | None
    stale_retrieval_rate: float | None
    hit_at_1: float | None
    hit_at_5: float | None
    mrr: float | None
    score: float
    alert: bool
    error_share: float = 0.0  # live pages whose last fetch errored, was flagged or skipped (in `details`)
    details: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        def h(s: float | None) -> str:
            return "-" if s is None else f"{s / 3600:.1f}h"

        srr = "-" if self.stale_retrieval_rate is None else f"{self.stale_retrieval_rate:.0%}"
        hits = (
            ""
            if self.hit_at_5 is None
            else f" hit@1: {self.hit_at_1:.2f} hit@5: {self.hit_at_5:.2f} mrr: {self.mrr:.2f}"
        )
        return (
            f"freshness: {self.score:.3f}{' ALERT' if self.alert else ''} stale: {self.stale_share:.1%} "
            f"fetch errors: {self.error_share:.1%} "
            f"age p50/p90: {h(self.age_median_s)}/{h(self.age_p90_s)} lag p50/p90: {h(self.lag_median_s)}/"
            f"{h(self.lag_p90_s)} stale retrieval: {srr}{hits}"
        )


def measure(
    ctx: SourceContext,
    *,
    stale_share: float,
    golden: GoldenRun | None = None,
    run_id: str | None = None,
    now: float | None = None,
) -> FreshnessReport:
    """Compute and store the metrics of the source's latest committed run."""
    now = time.time() if now is None else now
    pages = ctx.store.pages.load(ctx.name, with_markdown=False)
    ages, lags = _ages_and_lags(ctx, pages, now)
    live = [p for p in pages.values() if p.state == "live"]
    # Errored, flagged or skipped (not checked): the indexed text is unverified.
    failing = sum(p.outcome in (Outcome.ERROR, Outcome.FLAGGED, Outcome.SKIPPED) for p in live)
    error_share = failing / len(live) if live else 0.0
    age_p50, age_p90 = percentiles(ages)
    lag_p50, lag_p90 = percentiles(lags)
    srr = golden.stale_retrieval_rate if golden else None
    checks = ctx.source.checks
    score = freshness_score(  # the index as this run's commit left it (the drift it found is repaired)
        srr,
        error_share,
        lag_p90,
        age_p50,
        lag_target_s=checks.lag_target_h * 3600,
        age_target_s=checks.age_target_d * _DAY,
    )
    report = FreshnessReport(
        source=ctx.name,
        stale_share=stale_share,
        age_median_s=age_p50,
        age_p90_s=age_p90,
        lag_median_s=lag_p50,
        lag_p90_s=lag_p90,
        stale_retrieval_rate=srr,
        hit_at_1=golden.score.hit_at_1 if golden else None,
        hit_at_5=golden.score.hit_at_5 if golden else None,
        mrr=golden.score.mrr if golden else None,
        score=score,
        alert=score < checks.freshness_alert,
        error_share=error_share,
        details={
            "sections": len(ages),
            "landed": len(lags),
            "live_pages": len(live),
            "failing_pages": failing,
            "error_share": error_share,
            **_golden_details(golden),
        },
    )
    row = {k: v for k, v in asdict(report).items() if k not in ("alert", "error_share")}
    ctx.store.metrics.add_metrics({**row, "run_id": run_id, "measured_at": now})
    return report


def _ages_and_lags(ctx: SourceContext, pages: dict[str, PageRow], now: float) -> tuple[list[float], list[float]]:
    """Each indexed section's content age, and the embedding lags of the latest run."""
    window = _RunWindow.of(ctx.store.runs.recent(ctx.name, limit=2))
    ages: list[float] = []
    lags: list[float] = []
    for s in ctx.store.manifest.times(ctx.name):  # streamed: 800,000 sections are not held
        ages.append(section_age(now, s.changed_at, _last_changed(pages, s.url)))
        if window is not None and (lag := window.lag(s, pages.get(s.url))) is not None:
            lags.append(lag)
    return ages, lags


@dataclass(frozen=True, slots=True)
class _RunWindow:
    """The latest two committed runs' start times: which sections the latest run wrote for
    a change seen since the run before it."""

    latest: float
    previous: float | None

    @classmethod
    def of(cls, runs: list[dict[str, Any]]) -> _RunWindow | None:
        """From the latest two committed runs, newest first; None before the first."""
        if not runs:
            return None
        return cls(runs[0]["started_at"], runs[1]["started_at"] if len(runs) > 1 else None)

    def lag(self, s: SectionTimes, page: PageRow | None) -> float | None:
        """The section's embedding lag, when the latest run wrote it for such a change."""
        if page is None or s.indexed_at < self.latest or (page.last_changed or 0.0) < (self.previous or 0.0):
            return None
        updated = _updated(page.page_date)
        return embedding_lag(
            s.indexed_at, page.last_changed, updated, first_seen=page.first_seen, previous_run=self.previous
        )


def _golden_details(golden: GoldenRun | None) -> dict[str, Any]:
    return {
        "golden_queries": golden.score.queries if golden else 0,
        "golden_misses": golden.score.misses if golden else [],
        "stale_queries": golden.stale_queries if golden else [],
    }


@dataclass(slots=True)
class AfterRun:
    report: FreshnessReport
    golden: GoldenRun | None
    reindex_requested: str | None  # reason, when this run's misses asked for a full re-index
    reindex_settled: bool  # a requested re-index landed and its request was cleared
    deliveries: list[Delivery]


def after_run(ctx: SourceContext, *, stale_share: float, run_id: str | None = None) -> AfterRun:
    """What `freshness_metrics` does after every refresh: settle a landed re-index request,
    run the golden set (counting misses), store the metrics and deliver change events."""
    metrics = ctx.store.metrics
    state = ctx.store.sources.get(ctx.name)
    settled = metrics.settle_reindex(ctx.name, state.active_version) if state else False
    path = golden_file(ctx.source)
    golden = evaluate(ctx, load_golden(path)) if path else None
    requested = record_misses(ctx, golden) if golden and golden.cases else None
    report = measure(ctx, stale_share=stale_share, golden=golden, run_id=run_id)
    deliveries = deliver_hooks(ctx.store, ctx.settings.webhooks)
    return AfterRun(report, golden, requested, settled, deliveries)


def _last_changed(pages: dict[str, PageRow], url: str) -> float | None:
    page = pages.get(url)
    return page.last_changed if page else None


def _updated(page_date: str | None) -> float | None:
    """The end (UTC) of the day a page says it was updated: the latest the change can have
    happened, so a lag measured from it is never overstated. Month-only dates say too
    little and are ignored."""
    if not page_date or len(page_date) != 10:
        return None
    try:
        day = time.strptime(page_date, "%Y-%m-%d")
    except ValueError:
        return None
    return calendar.timegm(day) + _DAY
