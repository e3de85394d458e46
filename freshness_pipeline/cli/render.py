"""What the commands print for a person: lines where the output is a story, rich tables where
it is a table (search results, weak searches, the freshness history). `--json` output is
written by the commands themselves and never passes through here."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..api import PAGES, alert_reasons, counts_text, history_rows, run_line
from ..config import CheckPolicy

EXPLANATION = 60  # characters: a page error this long is an explanation, not a status
OFF_TERMINAL_WIDTH = 160  # a pipe, a file or a test: wide enough that a table rarely wraps


def console() -> Console:
    """A console on the current stdout (which a test or a redirect may have replaced)."""
    out = sys.stdout
    width = None if out.isatty() else OFF_TERMINAL_WIDTH
    return Console(file=out, width=width, markup=False, highlight=False, emoji=False)


def _when(ts: float) -> str:
    """In UTC, as the alerts, the history and the verdicts say their times."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def _table(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def run_lines(name: str, outcome: dict[str, Any]) -> list[str]:
    """`freshness run`'s text for one source: the run line (`core/run_counts.py`, as the
    demo and the log print it; never made-up zeros), its status when not a success, the
    checks that did not pass, the pages in error. Each message is printed once: a blocking
    check is the `blocked:` line only, and a reason shared by many pages (an outage held)
    is one line with the count of pages, as is any reason shared by several pages."""
    line = run_line(outcome)
    nothing = " (nothing was indexed)" if line and outcome.get("new") is None else ""
    empty = "no counts recorded" if outcome.get("status") == "success" else "the crawl did not finish"
    lines = [f"{name}: {line or empty}{nothing}"]
    status, message = outcome.get("status"), outcome.get("message") or ""
    if status != "success":
        lines.append(f"  {status}: {plain_error(message) or 'no message'}")
    if outcome.get("reindex_reason"):
        lines.append(f"  full re-index: {outcome['reindex_reason']}")
    errors = list((outcome.get("error_pages") or {}).items())
    pages_of: dict[str, list[str]] = {}
    for url, reason in errors:
        pages_of.setdefault(reason, []).append(url)
    # An explanation (an outage hold) shared by pages is said once, not again as a warning.
    shared = {reason for reason, urls in pages_of.items() if len(urls) > 1 and len(reason) > EXPLANATION}
    lines += [f"  warning: {w}" for w in outcome.get("warnings") or [] if w not in shared]
    for c in outcome.get("checks") or []:
        first = (c.get("description") or "failed").strip().splitlines()[0]
        if status == "blocked" and f"{c['name']}: {c.get('description') or 'failed'}" in message:
            continue  # the `blocked:` line above says it
        lines.append(f"  check {c['name']}: {c['severity']}: {first}")
    lines += [f"  error on {text}" if n > 1 else f"  error: {text}" for n, text in by_reason(errors)]
    more = (outcome.get("errors") or 0) - len(errors)
    if more > 0:
        lines.append(f"  ... and {more} more pages in error, not in the run's summary")
    return lines


def by_reason(pages: Sequence[tuple[str, str]], shown: int = 3) -> list[tuple[int, str]]:
    """Pages with their reason, one line per reason (the most pages first), with its count of
    pages: `url: why` for a page alone, else `N pages: why: url, url, url and M more`."""
    urls: dict[str, list[str]] = {}
    for url, why in pages:
        urls.setdefault(why, []).append(url)
    lines = []
    for why, group in sorted(urls.items(), key=lambda item: -len(item[1])):
        more = f" and {len(group) - shown} more" if len(group) > shown else ""
        text = (
            f"{group[0]}: {why}" if len(group) == 1 else f"{len(group)} pages: {why}: {', '.join(group[:shown])}{more}"
        )
        lines.append((len(group), text))
    return lines


_CLASS_PATH = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Z]\w*)(?=:)")


def plain_error(message: str) -> str:
    """A failure line without Python class paths: `freshness_pipeline.adapters.discovery.
    DiscoveryError: no sitemap` reads `DiscoveryError: no sitemap`."""
    return _CLASS_PATH.sub(r"\1", message.strip())


def alert_lines(measured: dict[str, Any], checks: CheckPolicy) -> list[str]:
    """Which figures put the latest score under `checks.freshness_alert`, and why."""
    reasons = alert_reasons(measured, lag_target_s=checks.lag_target_h * 3600, age_target_s=checks.age_target_d * 86400)
    head = f"  ALERT: score {measured['score']:.3f} is under checks.freshness_alert {checks.freshness_alert:g}"
    return [head + (", because of:" if reasons else ""), *(f"    {why}" for why in reasons)]


def print_status(r: dict[str, Any], checks: CheckPolicy) -> None:
    """One source of `freshness status`: its index, last run, pages to look at, freshness."""
    last, attempt = r.get("last_run") or {}, r.get("last_attempt") or {}
    when = _when(last["finished_at"]) if last else "never"
    head = f"{r['source']}: {r['pages_live']} pages, {r['sections_indexed']} sections indexed; last success {when}"
    if attempt and attempt["status"] != "success":
        head += f"; last attempt {_when(attempt['finished_at'])} {attempt['status']}"
    print(head)
    for e in r.get("earlier_failures") or []:
        why = f": {plain_error(e['message'])}" if e.get("message") else ""
        print(f"  earlier attempt {_when(e['finished_at'])} {e['status']} (run {e['run_id']}){why}")
    if not r["index"]["clean"]:
        print(f"  INDEX NOT HEALTHY: {r['index']['summary']}")
    if last:
        print(f"  {counts_text(last['counts'], PAGES)}")
    for url, n in r.get("flapping", []):
        print(f"  flapping: {url} re-embedded in {n} runs")
    for _, text in by_reason(r.get("flagged", [])):
        print(f"  flagged: {text}")
    _print_freshness(r, checks)


def print_unlisted(source: str, sections: int) -> None:
    """A source the state store holds that the sources file no longer names."""
    kept = f"its {sections} sections are still in the vector store" if sections else "nothing of it is indexed"
    print(
        f"{source}: not in the sources file; {kept}. "
        f"`freshness retire {source} --yes` drops its vectors, its state and its partition"
    )


def retired_lines(done: dict[str, Any]) -> list[str]:
    """What `freshness retire` dropped."""
    spaces = ", ".join(done["namespaces"]) or "none"
    partition = "deleted (its runs stay in Dagster's history)" if done["partition"] else "none to delete"
    return [
        f"retired {done['source']}:",
        f"  vector store: namespaces {spaces} dropped (the index held {done['sections']} sections)",
        f"  state store: {done['rows']} rows deleted",
        f"  Dagster partition: {partition}",
    ]


def _print_freshness(r: dict[str, Any], checks: CheckPolicy) -> None:
    stalled = (r.get("freshness") or {}).get("not_refreshed")
    verdict = r.get("verdict") or {}
    if stalled:
        print(f"  ALERT: not refreshed: {plain_error(stalled)}")
    elif verdict.get("state") in ("never", "stale") and not verdict.get("by_score"):
        print(f"  {'ALERT: ' if verdict['level'] != 'ok' else ''}{verdict['reason']}")
    if r.get("freshness_history"):
        f = r["freshness"]
        print(f"  freshness score {f['score']:.3f}" + (" (measured at the last success)" if stalled else ""))
        if f["alert"] and f["score"] < checks.freshness_alert:
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
    shown = history_rows(rows)[-5:]
    table = _table(*(map(str, shown[0]) if shown else ()))
    for row in shown:
        table.add_row(*("-" if v is None else str(v) for v in row.values()))
    console().print(Padding(table, (0, 0, 0, 4), expand=False))


def print_hits(hits: Sequence[Any], threshold: float | None) -> None:
    """Search results as a table, in the fused order, each with its cosine similarity (which
    that order does not follow); then the best one and whether it was weak."""
    if hits:
        table = _table("#", "cosine", "section", "text")
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
    weak = best is not None and threshold is not None and best < threshold
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
