"""What the commands print for a person: lines where the output is a story, rich tables where
it is a table (search results, weak searches, the freshness history). `--json` output is
written by the commands themselves and never passes through here."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..config import CheckPolicy
from ..core.alerts import alert_reasons
from ..core.run_counts import PAGES, RECORDS, counts_text

SHOWN_ERRORS = 10
OFF_TERMINAL_WIDTH = 160  # a pipe, a file or a test: wide enough that a table rarely wraps


def console() -> Console:
    """A console on the current stdout (which a test or a redirect may have replaced)."""
    out = sys.stdout
    width = None if out.isatty() else OFF_TERMINAL_WIDTH
    return Console(file=out, width=width, markup=False, highlight=False, emoji=False)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _table(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def run_lines(name: str, outcome: dict[str, Any]) -> list[str]:
    """`freshness run`'s text for one source: the counts the run produced (never made-up
    zeros), its status when not a success, the checks that did not pass, the pages in error."""
    keys = (*PAGES, *RECORDS)
    shown = [k for k in keys if outcome.get(k) is not None and (k != "skipped" or outcome[k])]  # skips when any
    counts = [f"{k}: {outcome[k]}" for k in shown]
    if not counts:
        lines = [f"{name}: the crawl did not run"]
    elif outcome.get("new") is None:
        lines = [f"{name}: {' '.join(counts)} (nothing was indexed)"]
    else:
        lines = [f"{name}: {' '.join(counts)}"]
    if outcome.get("status") != "success":
        lines.append(f"  {outcome.get('status')}: {outcome.get('message') or 'no message'}")
    if outcome.get("reindex_reason"):
        lines.append(f"  full re-index: {outcome['reindex_reason']}")
    lines += [f"  warning: {w}" for w in outcome.get("warnings") or []]
    for c in outcome.get("checks") or []:
        first = (c.get("description") or "failed").strip().splitlines()[0]
        lines.append(f"  check {c['name']}: {c['severity']}: {first}")
    errors = list((outcome.get("error_pages") or {}).items())
    lines += [f"  error: {url}: {reason}" for url, reason in errors[:SHOWN_ERRORS]]
    more = max(len(errors), outcome.get("errors") or 0) - SHOWN_ERRORS
    if more > 0:
        lines.append(f"  ... and {more} more pages in error")
    return lines


def alert_lines(measured: dict[str, Any], checks: CheckPolicy) -> list[str]:
    """Which figures put the latest score under `checks.freshness_alert`, and why."""
    reasons = alert_reasons(measured, lag_target_s=checks.lag_target_h * 3600, age_target_s=checks.age_target_d * 86400)
    head = f"  ALERT: score {measured['score']:.3f} is under checks.freshness_alert {checks.freshness_alert:g}"
    return [head + (", because of:" if reasons else ""), *(f"    {why}" for why in reasons)]


def print_status(r: dict[str, Any], checks: CheckPolicy) -> None:
    """One source of `freshness status`: its index, last run, pages to look at, freshness."""
    last = r.get("last_run") or {}
    when = _when(last["finished_at"]) if last else "never"
    print(f"{r['source']}: {r['pages_live']} pages, {r['sections_indexed']} sections indexed; last run {when}")
    if not r["index"]["clean"]:
        print(f"  INDEX NOT HEALTHY: {r['index']['summary']}")
    if last:
        print(f"  {counts_text(last['counts'], PAGES)}")
    for url, n in r.get("flapping", []):
        print(f"  flapping: {url} re-embedded in {n} runs")
    for url, why in r.get("flagged", []):
        print(f"  flagged: {url}: {why}")
    _print_freshness(r, checks)


def _print_freshness(r: dict[str, Any], checks: CheckPolicy) -> None:
    if r.get("freshness_history"):
        f = r["freshness"]
        print(f"  freshness score {f['score']:.3f}")
        if f["alert"]:
            print("\n".join(alert_lines(f, checks)))
        _print_history(r["freshness_history"])
        if f.get("details", {}).get("golden_misses"):
            print(f"  golden misses: {'; '.join(f['details']['golden_misses'])}")
    for m in r.get("chunking_problems", []):
        print(f"  probable chunking problem: {m['kind']} {m['subject']!r} missed {m['consecutive']} runs in a row")
    if r.get("reindex_requested"):
        print(f"  full re-index requested for the next run: {r['reindex_requested']}")
    c = r.get("citations") or {}
    if c.get("keys"):
        print(f"  citation resolution rate (30 days): {c['rate']:.1%} of {c['keys']} keys")
    for w in r.get("webhooks", []):
        if w["backlog"] or w["last_error"]:
            print(f"  webhook {w['url']}: {w['backlog']} events waiting; last error: {w['last_error']}")


def _print_history(rows: list[dict[str, Any]]) -> None:
    """The last five measurements, as a table."""
    import pandas as pd

    from ..pipeline.history import history_table

    frame = history_table(pd.DataFrame(rows)).tail(5)
    table = _table(*map(str, frame.columns))
    for values in frame.itertuples(index=False):
        table.add_row(*("-" if pd.isna(v) else str(v) for v in values))
    console().print(Padding(table, (0, 0, 0, 4), expand=False))


def print_hits(hits: Sequence[Any], threshold: float | None) -> None:
    """Search results as a table, then the best score and whether it was weak."""
    if hits:
        table = _table("#", "score", "section", "text")
        for i, h in enumerate(hits, 1):
            span = f"chars {h.start}-{h.end}" if h.start is not None else "(not in the live page text)"
            where = [h.url, f"[{h.heading_path}]", f"key={h.key}", span + (f"  as of {h.as_of}" if h.as_of else "")]
            if h.explain:
                where.append(f"found by {h.explain}")
            table.add_row(str(i), f"{h.score:.3f}", Text("\n".join(where)), Text(h.text[:160].replace("\n", " ")))
        console().print(table)
    else:
        print("no results")
    best = max(h.score for h in hits) if hits else None  # hybrid order is not cosine order
    weak = bool(hits) and threshold is not None and (best is None or best < threshold)
    print(
        f"best cosine similarity: {'-' if best is None else f'{best:.3f}'}"
        + (f" (weak match: under {threshold:.2f}; recorded, see `freshness weak`)" if weak else "")
    )


def print_weak(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no weak matches")
        return
    table = _table("when", "score", "query", "best match")
    for r in rows:
        score = "-" if r["best_score"] is None else f"{r['best_score']:.3f}"
        table.add_row(_when(r["created_at"]), score, Text(repr(r["query"])), Text(r["best_url"] or "-"))
    console().print(table)


def print_reconcile(name: str, report: Any, *, fix: bool) -> None:
    found = f"orphans: {len(report.orphans)} missing: {len(report.missing)} mismatched: {len(report.mismatched)}"
    fixed = f" fixed: {report.fixed}" if fix else ""
    print(f"{name} ({report.namespace or 'nothing indexed'}, {report.records} records): {found}{fixed}")
    if report.damage:
        print(f"  {report.damage}")
    for kind in ("orphans", "missing", "mismatched"):
        for rid in getattr(report, kind)[:20]:
            print(f"  {kind}: {rid}")
