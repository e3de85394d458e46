"""`freshness_metrics`: after every refresh, the source's freshness metrics, the golden set
against the index, miss counters (and the re-index they may request), and change-event
delivery to webhooks. Metric history is rendered from the state store as a table."""

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import dagster as dg

from ..core.tables import GOLDEN, HISTORY
from ..pipeline.history import history_values
from ..pipeline.indexing import IndexReport
from ..pipeline.metrics import FreshnessReport, after_run
from ..pipeline.planning import PlanReport
from .assets import freshness_asset
from .checks import FRESHNESS_ALERT, freshness_alert
from .heartbeats import beating
from .metadata import table
from .resources import FreshnessResource
from .step_endings import results_on_failure


def _float(value: float) -> dg.FloatMetadataValue:
    return dg.MetadataValue.float(round(float(value), 4))


def per_source(r: FreshnessReport) -> dict[str, dg.FloatMetadataValue]:
    """The figures plotted per source over time: score, stale share, lag p90, error share."""
    return {
        "score": _float(r.score),
        "stale_share": _float(r.stale_share),
        "lag_p90_h": _float((r.lag_p90_s or 0.0) / 3600),
        "error_share": _float(r.error_share),
    }


def latest_per_source(row: dict[str, Any]) -> dict[str, dg.FloatMetadataValue]:
    """`per_source`'s figures of another source's latest measurement (a metrics history row)."""
    error_share = (row.get("details") or {}).get("error_share")
    values = {
        "score": row.get("score"),
        "stale_share": row.get("stale_share"),
        "lag_p90_h": (row.get("lag_p90_s") or 0.0) / 3600,  # as `per_source` has it
        "error_share": error_share,
    }
    return {k: _float(v) for k, v in values.items() if v is not None and v == v}  # NaN: not plotted


@freshness_asset(
    "metrics",
    kinds={"python"},
    code_version="metrics-1",
    check_specs=[FRESHNESS_ALERT],
    description="Freshness score, stale share, content age, embedding lag, golden-set hits; "
    "requests a re-index on repeated misses and delivers change events to webhooks.",
)
@results_on_failure
@beating()
def freshness_metrics(
    context: dg.AssetExecutionContext,
    freshness: FreshnessResource,
    diff_plan: PlanReport,
    vector_index: IndexReport,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    with freshness.open(context.partition_key) as ctx:
        out = after_run(ctx, stale_share=diff_plan.stale_share, run_id=context.run.run_id)
        history = table(history_values(ctx.store.metrics.history(ctx.name)), HISTORY)
        # Every source's latest figures, so that each `score/<source>` & co. has a value at
        # every materialization: the plot draws one line per source, stepping at its runs.
        others = {
            s.name: latest_per_source(rows[-1])
            for s in ctx.settings.sources
            if s.name != ctx.name and (rows := ctx.store.metrics.history(s.name, limit=1))
        }
        alert = freshness_alert(out.report, ctx.source.checks)
    r = out.report
    context.log.info(f"{r.source}: {vector_index.line()}")
    # ALERT in the line follows the check (the index after the commit), as in the UI.
    context.log.info(f"{r.source}: {replace(r, alert=not alert.passed).line()}")
    if not alert.passed:
        context.log.warning(f"{r.source}: freshness alert: {alert.description}")
    if out.reindex_requested:
        context.log.warning(f"{r.source}: full re-index requested for the next run: {out.reindex_requested}")
    for d in out.deliveries:
        if d.error:
            context.log.warning(f"webhook {d.url}: delivered {d.delivered}, {d.backlog} waiting: {d.error}")
    metadata: dict[str, Any] = {  # Dagster's raw metadata values (its alias for them is internal)
        "score": _float(r.score),
        "error_share": _float(r.error_share),  # live pages failing their last fetch
        "stale_share": _float(r.stale_share),
        "age_median_h": _float((r.age_median_s or 0.0) / 3600),
        "age_p90_h": _float((r.age_p90_s or 0.0) / 3600),
        "lag_median_h": _float((r.lag_median_s or 0.0) / 3600),
        "lag_p90_h": _float((r.lag_p90_s or 0.0) / 3600),
        # The same figures named per source: the asset's Plots (Overview > Metadata, "Events")
        # draw each key over time across every partition's materializations, so a key per
        # source is one line per source, week after week ("Partitions" plots `score` & co.).
        **{f"{key}/{name}": value for name, values in others.items() for key, value in values.items()},
        **{f"{key}/{r.source}": value for key, value in per_source(r).items()},
        "history": history,
        **({"reindex_requested": out.reindex_requested} if out.reindex_requested else {}),
        "webhook_backlog": sum(d.backlog for d in out.deliveries),
    }
    if out.golden is not None:
        metadata |= {
            "stale_retrieval_rate": _float(r.stale_retrieval_rate or 0.0),
            "hit_at_1": _float(out.golden.score.hit_at_1),
            "hit_at_5": _float(out.golden.score.hit_at_5),
            "mrr": _float(out.golden.score.mrr),
            "golden": table(out.golden.rows(), GOLDEN),  # its rank None where not found
        }
    yield dg.MaterializeResult(metadata=metadata)
    yield alert
