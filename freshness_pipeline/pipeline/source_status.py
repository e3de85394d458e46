"""What `freshness status` shows: per source, pages and sections indexed, the last attempt
(whatever its outcome) beside the last success (the last committed run),
pages flagged for review and pages that re-embed on most runs (flapping: counted from the
"changed" change events, one per page per run that rewrote its sections), and whether the
vector store holds what the manifest says (the comparison `freshness reconcile` makes: a
lost or damaged vector store is never reported healthy), and its verdict (`verdicts.py`,
as the `source_fresh` check has it): a source whose last attempt failed, was canceled or was
blocked after its last success has not refreshed, and alerts whatever score was measured
at that success. Reads only."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..config import Settings
from .attempts import latest_attempt
from .context import SourceContext
from .reconcile import compare
from .verdicts import source_verdict

FLAPPING_MIN_RUNS = 3  # re-embedded in at least this many runs of the last week ...
FLAPPING_WINDOW_S = 7 * 86_400.0  # ... and in more than half of them: a missed noise rule?


def source_status(settings: Settings, name: str, *, recent_runs: int = 10) -> dict[str, Any]:
    ctx = SourceContext.open(settings, name, read_only=True)
    try:
        pages = ctx.store.pages.load(name, with_markdown=False).values()
        runs = ctx.store.runs.recent(name, limit=recent_runs)
        tiers = Counter(p.tier for p in pages if p.state == "live")
        since = time.time() - FLAPPING_WINDOW_S
        week_runs = sum(1 for r in ctx.store.runs.recent(name, limit=1000) if r["started_at"] >= since)
        reembeds = Counter(ctx.store.runs.reembed_counts(name, since))
        flapping = [(url, n) for url, n in reembeds.most_common(10) if n >= FLAPPING_MIN_RUNS and n * 2 > week_runs]
        index = compare(ctx, ctx.store.sources.get(name), committed=True)  # what searches see
        fresh = freshness_status(ctx)
        if fresh["freshness"] and not index.clean:
            fresh["freshness"]["alert"] = True  # a score measured on an index that is not there
        last = runs[0] if runs else None
        attempt = latest_attempt(ctx.store.runs.last_attempt(name), last)
        earlier = earlier_failures(ctx.store.runs.run_records(name, limit=recent_runs), runs, attempt)
        verdict = source_verdict(ctx.store, ctx.source)
        if fresh["freshness"] and not verdict.passed:
            fresh["freshness"]["alert"] = True
        if verdict.state in ("blocked", "failed"):
            fresh["freshness"] = {**(fresh["freshness"] or {}), "alert": True, "not_refreshed": verdict.reason}
        return json_safe(
            {
                "source": name,
                "pages_live": sum(1 for p in pages if p.state == "live"),
                "pages_gone": sum(1 for p in pages if p.state not in ("live", "candidate")),
                "sections_indexed": ctx.store.manifest.count(name),
                "embedding_cache_rows": ctx.store.vector_cache.size(),  # every source's; reconcile --fix prunes
                "tiers": dict(tiers),
                "last_run": last,  # the last success: the last run that committed
                "last_attempt": attempt,
                "earlier_failures": earlier,
                "verdict": {
                    "state": verdict.state,
                    "level": verdict.level,
                    "reason": verdict.reason,
                    "by_score": verdict.by_score,
                },
                "flagged": sorted((p.url, p.flag) for p in pages if p.flag),
                "flapping": flapping,
                "index": {
                    "clean": index.clean,
                    "summary": index.summary(),
                    "namespace": index.namespace,
                    "missing": len(index.missing),
                    "orphans": len(index.orphans),
                    "mismatched": len(index.mismatched),
                    "damage": index.damage,
                },
                **fresh,
            }
        )
    finally:
        ctx.close()


def earlier_failures(
    records: list[dict[str, Any]], successes: list[dict[str, Any]], attempt: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The runs that ended unsuccessfully (failed, blocked, canceled; a dead run failed by the
    next) since the success before the last attempt, the last attempt left out; newest first."""
    if attempt is None:
        return []
    before = [r["finished_at"] for r in successes if r["run_id"] != attempt["run_id"]]
    since = max((f for f in before if f <= attempt["finished_at"]), default=None)
    return [
        {k: r[k] for k in ("run_id", "status", "finished_at")} | {"message": r["facts"].get("message")}
        for r in records
        if r["status"] not in (None, "running", "success")
        and r["finished_at"] is not None
        and r["run_id"] != attempt["run_id"]
        and (since is None or r["finished_at"] > since)
    ]


def freshness_status(ctx: SourceContext) -> dict[str, Any]:
    """The metrics part of `freshness status`: the latest measurement (with its fetch error
    share beside the score) and its history, the golden-set queries and sections missing run
    after run (probable chunking problems), a pending re-index request, and the citation
    resolution rate of the last 30 days."""
    metrics = ctx.store.metrics
    history = metrics.history(ctx.name)
    latest = history[-1] if history else None
    keys = metrics.cited_keys(ctx.name)
    manifest = ctx.store.manifest
    resolved = sum(1 for k in keys if manifest.by_key(ctx.name, manifest.resolve_key(ctx.name, k)[0]))
    return {
        "freshness": latest
        and {
            **latest,
            "error_share": (latest["details"] or {}).get("error_share"),  # None: measured before it was
            "alert": latest["score"] < ctx.source.checks.freshness_alert,
        },
        "freshness_history": history,
        "chunking_problems": metrics.chronic_misses(ctx.name, ctx.source.checks.golden_miss_runs),
        "reindex_requested": (metrics.pending_reindex(ctx.name) or {}).get("reason"),
        "citations": {"keys": len(keys), "resolved": resolved, "rate": resolved / len(keys) if keys else None},
        "webhooks": [{**metrics.cursor(h.url), "backlog": metrics.backlog(h.url)} for h in ctx.settings.webhooks],
    }


def json_safe(value: Any) -> Any:
    """`value` with every NaN or infinite float made None, so that `status --json` is strict
    JSON (`null`, never `NaN`)."""
    if isinstance(value, float):  # numpy's float64 is a float too
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
