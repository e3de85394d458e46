"""Asset checks, per source partition. Thresholds come from each source's `checks:`.

- `diff_plan` / `stale_share`: WARN at `stale_warn`, ERROR at `stale_error`.
- `diff_plan` / `change_spike` (blocking): `vector_index` does not run on a spike unless the
  run carries `freshness/allow-spike=true`.
- `fetched_pages` / `flagged_pages`: soft 404s, bot walls, repeated errors, as WARN.
- `fetched_pages` / `pages_not_checked`: pages the run skipped or could not fetch; WARN,
  ERROR when they are most of the run's pages (robots.txt unreachable, a site down).
- `vector_index` / `reconcile_clean`: the manifest equals what the vector store holds.

The first four judge the report their asset's step just made, so they run inside that step
(the specs below are the assets' `check_specs`; the functions build their results). As
steps of their own they cost every run four more steps, each with its own events, input
loads and, under the Celery executor, a task: a quiet in-process refresh of the demo site
took 1.03 s that way, 0.91 s this way (`python -m bench.overhead`). `reconcile_clean`
reads the stores after the commit rather than a report, so it stays a step of its own.
"""

import warnings
from typing import Any

import dagster as dg

from ..config import CheckPolicy
from ..core.spike import SpikeVerdict, history_shares, judge, suspects
from ..pipeline.context import SourceContext
from ..pipeline.crawl import CrawlReport
from ..pipeline.planning import PlanReport, changed_sample
from ..pipeline.reconcile import reconcile
from .metadata import md_table
from .partitions import sources_partitions
from .resources import FreshnessResource
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
    description="Indexed sections whose stored hash no longer matches the live page, as a share "
    "of the sections indexed, read before the commit. WARN at `checks.stale_warn` (2%), "
    "ERROR at `checks.stale_error` (10%).",
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


def _pct(share: float) -> str:
    """A share as the UI shows it: 25%, 2.5%, 0.12%."""
    return f"{share * 100:.3g}%"


def stale_share(plan: PlanReport, policy: CheckPolicy) -> dg.AssetCheckResult:
    """`plan.stale_share` against the source's WARN and ERROR thresholds."""
    share = plan.stale_share
    severity = dg.AssetCheckSeverity.ERROR if share >= policy.stale_error else dg.AssetCheckSeverity.WARN
    if share >= policy.stale_error:
        why = f"stale share {_pct(share)} ≥ ERROR at {_pct(policy.stale_error)}"
    elif share >= policy.stale_warn:
        why = f"stale share {_pct(share)} ≥ WARN at {_pct(policy.stale_warn)} (ERROR at {_pct(policy.stale_error)})"
    else:
        why = f"stale share {_pct(share)} < WARN at {_pct(policy.stale_warn)}"
    return dg.AssetCheckResult(
        check_name=STALE_SHARE.name,
        passed=share < policy.stale_warn,
        severity=severity,
        description=f"{why}, of {plan.indexed_before} sections indexed",
        metadata={
            "stale_share": round(share, 4),
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
        "history_median": round(verdict.median, 4) if verdict.median is not None else None,
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
    metadata["top_pages"] = md_table(plan.top_pages(), ("page", "sections written"))
    metadata["suspects"] = md_table(found, ("phrase added (+) / removed (-)", "changed sections"))
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


@dg.asset_check(
    asset="vector_index",
    partitions_def=sources_partitions,
    description="The manifest equals what the vector store holds: no orphans, nothing missing, "
    "no hash mismatch. ERROR on drift.",
)
def reconcile_clean(context: dg.AssetCheckExecutionContext, freshness: FreshnessResource) -> dg.AssetCheckResult:
    with freshness.open(context.partition_key) as ctx:
        report = reconcile(ctx)
    lists = {"orphans": report.orphans, "missing": report.missing, "mismatched": report.mismatched}
    return dg.AssetCheckResult(
        passed=report.clean,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{report.namespace or 'nothing indexed'}: {report.records} records match the manifest"
        if report.clean
        else f"ERROR: {report.summary()} (clean is 0 missing, 0 orphans, 0 mismatched)",
        metadata={
            "namespace": report.namespace,
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
        metadata={"flagged": len(flagged), "pages": md_table(flagged[:LIST_MAX], ("page", "why"))},
    )


def pages_not_checked(report: CrawlReport) -> dg.AssetCheckResult:
    unchecked = {**report.errors, **report.skipped}
    share = len(unchecked) / report.crawled if report.crawled else 0.0
    severe = share > NOT_CHECKED_ERROR_SHARE
    return dg.AssetCheckResult(
        check_name=PAGES_NOT_CHECKED.name,
        passed=not unchecked,
        severity=dg.AssetCheckSeverity.ERROR if severe else dg.AssetCheckSeverity.WARN,
        description=None
        if not unchecked
        else (
            f"{len(unchecked)} of {report.crawled} pages not checked ({len(report.skipped)} skipped, "
            f"{len(report.errors)} in error); e.g. {next(iter(sorted(unchecked.items())))[1]}"
        ),
        metadata={
            "skipped": len(report.skipped),
            "errors": len(report.errors),
            "not_checked_share": round(share, 4),
            "pages": md_table(sorted(unchecked.items())[:LIST_MAX], ("page", "why")),
        },
    )


refresh_checks = [reconcile_clean]  # the others are `check_specs` of their assets
