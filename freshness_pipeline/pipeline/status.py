"""What `freshness status` shows: per source, pages and sections indexed, the last run,
pages flagged for review and pages that re-embed on most runs (flapping)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..config import Settings
from .context import SourceContext
from .metrics import freshness_status

FLAPPING_MIN_RUNS = 3  # a page re-embedded in at least this many of the recent runs


def source_status(settings: Settings, name: str, *, recent_runs: int = 10) -> dict[str, Any]:
    ctx = SourceContext.open(settings, name)
    try:
        pages = ctx.store.load_pages(name, with_markdown=False).values()
        runs = ctx.store.runs(name, limit=recent_runs)
        tiers = Counter(p.tier for p in pages if p.state == "live")
        changes = Counter()
        cutoff = runs[-1]["started_at"] if runs else 0.0
        for p in pages:
            changes[p.url] = sum(1 for t in p.change_times if t >= cutoff)
        return {
            "source": name,
            "pages_live": sum(1 for p in pages if p.state == "live"),
            "pages_gone": sum(1 for p in pages if p.state != "live"),
            "sections_indexed": ctx.store.manifest_count(name),
            "tiers": dict(tiers),
            "last_run": runs[0] if runs else None,
            "flagged": sorted((p.url, p.flag) for p in pages if p.flag),
            "flapping": [(u, n) for u, n in changes.most_common(10) if n >= FLAPPING_MIN_RUNS and len(runs) >= FLAPPING_MIN_RUNS],
            **freshness_status(ctx),
        }
    finally:
        ctx.close()
