"""Asset checks, per source partition, with thresholds from each source's `checks:` (what
each judges: the specs' descriptions below, and docs/dagster.md). Every check but
`source_fresh` (`source_freshness.py`) is its asset's `check_spec` and runs inside its
step: as steps of their own they would cost every run more steps, events, input loads and,
under Celery, tasks. `reconcile_clean` reads the stores after the commit, in the same step."""

import time
import warnings
from typing import Any

import dagster as dg

from ..config import CheckPolicy
from ..core import verdict as source_verdict
from ..core.alerts import alert_reasons
from ..core.spike import SpikeVerdict, history_shares, judge, suspects
from ..core.tables import PAGES_FOR_REVIEW, SUSPECTS, TOP_PAGES
from ..core.verdict import Verdict
from ..pipeline.context import SourceContext
from ..pipeline.crawl import CrawlReport
from ..pipeline.metrics import FreshnessReport
from ..pipeline.planning import PlanReport, changed_sample
from ..pipeline.reconcile import reconcile
from .metadata import table
from .partitions import sources_partitions
from .tags import ALLOW_SPIKE_TAG

SUSPECT_SAMPLE = 300  # changed sections compared word by word for the suspects
LIST_MAX = 50  # rows of a list in check metadata
NOT_CHECKED_ERROR_SHARE = 0.5  # more of a run's pages than this not checked is an ERROR

# Per-partition checks (one result per source in the UI) are a preview feature in Dagster
# 1.13; the warning would be printed on every load of the code location.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)

STALE_SHARE = dg.AssetCheckSpec(
    "stale_share",
    asset="diff_plan",
    partitions_def=sources_partitions,
    description="Information: the indexed sections whose stored hash no longer matched the live page "
    "when this run planned, as a share of the sections indexed. This run's vector_index rewrites "
    "them, so it passes; past `checks.stale_warn` (2%) or `checks.stale_error` (10%) it says the "
    "cadence let that much drift build up. An index still stale after a run shows in "
    "`source_fresh` and `freshness_alert`.",
)
CHANGE_SPIKE = dg.AssetCheckSpec(
    "change_spike",
    asset="diff_plan",
    partitions_def=sources_partitions,
    blocking=True,
    description="Blocks vector_index when the share of sections this run would write is above "
    "`checks.spike_min_share` and `checks.spike_factor` times the median of the source's recent "
    f"runs. Re-run with `freshness run --allow-spike` (the run tag `{ALLOW_SPIKE_TAG}=true`) to let a real "
    "change through.",
)
FLAGGED_PAGES = dg.AssetCheckSpec(
    "flagged_pages",
    asset="fetched_pages",
    partitions_def=sources_partitions,
    description="Pages flagged for review (soft 404s, bot walls, repeated errors). Their last "
    "good text stays indexed until a person looks. WARN with the list.",
)
PAGES_NOT_CHECKED = dg.AssetCheckSpec(
    "pages_not_checked",
    asset="fetched_pages",
    partitions_def=sources_partitions,
    description="Pages this run did not check: skipped (robots.txt unreachable or disallowing, "
    "over max_bytes, not HTML, a temporary redirect, the run budget spent) or in error. Their "
    f"last text stays indexed, unverified. WARN; ERROR over {NOT_CHECKED_ERROR_SHARE:.0%} of the pages.",
)


RECONCILE_CLEAN = dg.AssetCheckSpec(
    "reconcile_clean",
    asset="vector_index",
    partitions_def=sources_partitions,
    description="The manifest equals what the vector store holds: no orphans, nothing missing, "
    "no hash mismatch. ERROR on drift.",
)
# `source_fresh` is a check of its own, run between refreshes (`source_freshness.py`).
SOURCE_FRESH_KEY = dg.AssetCheckKey(dg.AssetKey("vector_index"), "source_fresh")
FRESHNESS_ALERT = dg.AssetCheckSpec(
    "freshness_alert",
    asset="freshness_metrics",
    partitions_def=sources_partitions,
    description="The freshness score of the index after this run's commit (stale retrieval, fetch "
    "errors, embedding lag, content age; the drift the run repaired left out) against "
    "`checks.freshness_alert` (0.95). WARN under it, naming the figures that lowered it.",
)


# The checks whose failure at ERROR stops their step's run (the run's record says it blocked).
RUN_CHECKS = (STALE_SHARE, CHANGE_SPIKE, FLAGGED_PAGES, PAGES_NOT_CHECKED, RECONCILE_CLEAN, FRESHNESS_ALERT)
BLOCKING = frozenset(spec.name for spec in RUN_CHECKS if spec.blocking)


def _pct(share: float) -> str:
    """A share as the UI shows it: 25%, 2.5%, 0.12%."""
    return f"{share * 100:.3g}%"


def stale_share(plan: PlanReport, policy: CheckPolicy) -> dg.AssetCheckResult:
    """The drift `plan` found before the commit: information (this run repairs it)."""
    share = plan.stale_share
    if share >= policy.stale_error:
        level = f" ≥ {_pct(policy.stale_error)} (`checks.stale_error`): refresh this source more often"
    elif share >= policy.stale_warn:
        level = f" ≥ {_pct(policy.stale_warn)} (`checks.stale_warn`)"
    else:
        level = ""
    found = (
        f"{plan.stale} of {plan.indexed_before} indexed sections ({_pct(share)}) had drifted since the last "
        f"run{level}; this run's vector_index rewrites them"
        if plan.indexed_before
        else "nothing was indexed before this run"
    )
    return dg.AssetCheckResult(
        check_name=STALE_SHARE.name,
        passed=True,
        description=found,
        metadata={
            "stale_share": round(share, 4),
            "stale_sections": plan.stale,
            "warn_at": policy.stale_warn,
            "error_at": policy.stale_error,
            "indexed_before": plan.indexed_before,
        },
    )


def change_spike(ctx: SourceContext, plan: PlanReport, *, allowed: bool) -> dg.AssetCheckResult:
    """This run's change share against the source's recent runs; `allowed`: the run carries
    the override tag, so a spike is a WARN and `vector_index` runs."""
    source, policy = ctx.name, ctx.source.checks
    verdict = judge(plan.change_share, history_shares(ctx.store.runs.recent(source)), policy.spike_rule())
    metadata: dict[str, Any] = {  # Dagster's raw metadata values (its alias for them is internal)
        "change_share": round(verdict.share, 4),
        **({"history_median": round(verdict.median, 4)} if verdict.median is not None else {}),
        "history_runs": verdict.runs,
        "spike_min_share": policy.spike_min_share,
        "spike_factor": policy.spike_factor,
    }
    name = CHANGE_SPIKE.name
    if plan.reindex_reason:
        return dg.AssetCheckResult(
            check_name=name,
            passed=True,
            metadata=metadata,
            description=f"version re-index ({plan.reindex_reason}): rewriting everything is expected",
        )
    if not verdict.spike:
        return dg.AssetCheckResult(
            check_name=name, passed=True, metadata=metadata, description=_spike_rule(verdict, policy, False)
        )
    found = suspects(changed_sample(ctx, plan, SUSPECT_SAMPLE))
    metadata["top_pages"] = table(plan.top_pages(), TOP_PAGES)
    metadata["suspects"] = table(found, SUSPECTS)
    return dg.AssetCheckResult(
        check_name=name,
        passed=False,
        severity=dg.AssetCheckSeverity.WARN if allowed else dg.AssetCheckSeverity.ERROR,
        metadata={**metadata, "override": allowed},
        description=_spike_rule(verdict, policy, True, allowed)
        + ". "
        + _spike_story(source, verdict.share, verdict.median or 0.0, plan, found, allowed),
    )


def _spike_rule(verdict: SpikeVerdict, policy: CheckPolicy, spike: bool, allowed: bool = False) -> str:
    """The rule with this run's figures, e.g. "change share 62% ≥ ERROR (blocking) at 50% and
    4 × the recent median 3%"."""
    median = "no history" if verdict.median is None else f"the recent median {_pct(verdict.median)}"
    rule = f"{_pct(policy.spike_min_share)} and {policy.spike_factor:g} × {median}"
    if not spike:
        return f"change share {_pct(verdict.share)}: no spike (a spike is above {rule}, over {verdict.runs} runs)"
    level = "WARN (overridden)" if allowed else "ERROR (blocking)"
    return f"change share {_pct(verdict.share)} > {level} at {rule}"


def _spike_story(
    source: str, share: float, median: float, plan: PlanReport, found: list[tuple[str, int]], allowed: bool
) -> str:
    pages = ", ".join(f"{url} ({n})" for url, n in plan.top_pages(5))
    words = "; ".join(f"'{p}' in {n}" for p, n in found) or "none stand out"
    head = (
        f"{source}: this run would rewrite {share:.0%} of the sections (recent median {median:.0%}). "
        f"Top pages: {pages}. Normalization suspects: {words}. "
    )
    if allowed:
        return head + f"Let through by --allow-spike (the run tag {ALLOW_SPIKE_TAG}=true)."
    return head + (
        "vector_index did not run. If this is template noise, add a noise rule or fix the site and "
        f"re-run; if the change is real, re-run with `freshness run --allow-spike` (from the UI: the run "
        f"tag {ALLOW_SPIKE_TAG}=true)."
    )


def reconcile_clean(ctx: SourceContext) -> dg.AssetCheckResult:
    """The source's manifest against its vector store (waits for the source's lock)."""
    report = reconcile(ctx)
    lists = {"orphans": report.orphans, "missing": report.missing, "mismatched": report.mismatched}
    return dg.AssetCheckResult(
        check_name=RECONCILE_CLEAN.name,
        passed=report.clean,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{report.namespace or 'nothing indexed'}: {report.records} records match the manifest"
        if report.clean
        else f"ERROR: {report.summary()} (clean is 0 missing, 0 orphans, 0 mismatched)",
        metadata={
            **({"namespace": report.namespace} if report.namespace else {}),
            "records": report.records,
            **{k: len(v) for k, v in lists.items()},
            **{f"{k}_ids": dg.MetadataValue.json(sorted(v)[:LIST_MAX]) for k, v in lists.items() if v},
        },
    )


def flagged_pages(report: CrawlReport) -> dg.AssetCheckResult:
    flagged = list(report.for_review.items())
    return dg.AssetCheckResult(
        check_name=FLAGGED_PAGES.name,
        passed=not flagged,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{len(flagged)} pages flagged for review ≥ WARN at 1: {', '.join(u for u, _ in flagged[:3])}"
        + (" ..." if len(flagged) > 3 else "")
        if flagged
        else "no page flagged for review",
        metadata={"flagged": len(flagged), "pages": table(flagged[:LIST_MAX], PAGES_FOR_REVIEW)},
    )


def pages_not_checked(report: CrawlReport) -> dg.AssetCheckResult:
    unchecked = {**report.errors, **report.skipped}
    share = len(unchecked) / report.crawled if report.crawled else 0.0
    severe = share > NOT_CHECKED_ERROR_SHARE
    return dg.AssetCheckResult(
        check_name=PAGES_NOT_CHECKED.name,
        passed=not unchecked,
        severity=dg.AssetCheckSeverity.ERROR if severe else dg.AssetCheckSeverity.WARN,
        description=f"all {report.crawled} pages checked"
        if not unchecked
        else (
            f"{len(unchecked)} of {report.crawled} pages not checked ({len(report.skipped)} skipped, "
            f"{len(report.errors)} in error); e.g. {next(iter(sorted(unchecked.items())))[1]}"
        ),
        metadata={
            "skipped": len(report.skipped),
            "errors": len(report.errors),
            "not_checked_share": round(share, 4),
            "pages": table(sorted(unchecked.items())[:LIST_MAX], PAGES_FOR_REVIEW),
        },
    )


def source_fresh_result(verdict: Verdict) -> dg.AssetCheckResult:
    """`source_fresh` as `verdict` (`core/verdict.py`) has it: passes when "ok", else WARN or
    ERROR. The UI plots a check's numeric metadata across all its results, every partition's
    in one line: named per source (`hours_since/<source>`), each source gets its own plot."""
    name = verdict.source
    metadata: dict[str, Any] = {
        "verdict": verdict.state,
        f"warn_after_h/{name}": round(verdict.warn_after_s / 3600, 4),
        f"fail_after_h/{name}": round(verdict.fail_after_s / 3600, 4),
    }
    if verdict.age_s is not None:
        metadata[f"hours_since/{name}"] = round(verdict.age_s / 3600, 4)
    severity = dg.AssetCheckSeverity.ERROR if verdict.level == "error" else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(
        passed=verdict.passed, severity=severity, description=verdict.description, metadata=metadata
    )


def freshness_alert(report: FreshnessReport, policy: CheckPolicy) -> dg.AssetCheckResult:
    """`report`'s score (the index as the commit left it, as `freshness status` shows it)
    against `checks.freshness_alert`, naming the figures that lowered it."""
    row = {
        "stale_retrieval_rate": report.stale_retrieval_rate,
        "error_share": report.error_share,
        "lag_p90_s": report.lag_p90_s,
        "age_median_s": report.age_median_s,
    }
    targets = {"lag_target_s": policy.lag_target_h * 3600, "age_target_s": policy.age_target_d * 86_400}
    now = time.time()  # this run's commit is the source's last success
    verdict = source_verdict.judge(
        report.source, {}, last_success=now, score=report.score, alert_at=policy.freshness_alert, now=now
    )
    passed = verdict.passed
    reasons = alert_reasons(row, **targets)
    head = f"score after the commit {report.score:.3f} {'≥' if passed else '<'} {policy.freshness_alert:g}"
    return dg.AssetCheckResult(
        check_name=FRESHNESS_ALERT.name,
        passed=passed,
        severity=dg.AssetCheckSeverity.WARN,
        description=head + (f": {'; '.join(reasons)}" if reasons and not passed else ""),
        metadata={"score_after_commit": round(report.score, 4), "alert_at": policy.freshness_alert},
    )
