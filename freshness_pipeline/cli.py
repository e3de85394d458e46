"""`freshness`: the command line operators and scripts use. Each command is one library
call plus formatting; `run` goes through Dagster so every refresh shows up in the UI."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .adapters.damage import DamagedState
from .config import CheckPolicy, ConfigError, Settings, dagster_home, load_settings
from .defs.instance import write_instance_config


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code = _dispatch(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`freshness dump | head`): stop quietly, as `cat` would.
        # Point stdout at devnull so the interpreter's final flush cannot raise again.
        _silence_stdout()
        return 128 + signal.SIGPIPE
    return code


def _dispatch(args: argparse.Namespace) -> int:
    if args.func is _demo:
        if args.sources:
            print("error: the demo writes its own sources file into --home; drop --sources", file=sys.stderr)
            return 2
        return _demo(args)
    if args.sources:
        os.environ["FRESHNESS_SOURCES"] = str(Path(args.sources).resolve())
    os.environ.setdefault("DAGSTER_HOME", str(dagster_home()))
    write_instance_config(dagster_home())  # a home without dagster.yaml gets the project's (defs/instance.py)
    try:
        settings = load_settings()
        return int(args.func(args, settings) or 0)
    except (ConfigError, DamagedState) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, io.UnsupportedOperation):  # stdout replaced by a non-file object
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


def _query(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty: say what to search for")
    return text


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


RUN_HELP = """Exit status: 0 when every run succeeded, even when non-blocking checks failed
with WARN or ERROR (each is printed as a `check` line, and the counts are in --json);
1 when a run failed or a blocking check (change_spike) stopped it before indexing."""


def _parser() -> argparse.ArgumentParser:
    sources_help = "sources file (default $FRESHNESS_SOURCES or sources.yaml); before or after the command"
    p = argparse.ArgumentParser(prog="freshness", description=__doc__)
    p.add_argument("--sources", help=sources_help)
    # The same option on every command; SUPPRESS keeps a value given before the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--sources", default=argparse.SUPPRESS, help=sources_help)
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, help: str, **kw: Any) -> argparse.ArgumentParser:
        parents = kw.pop("parents", [common])
        return sub.add_parser(name, help=help, description=kw.pop("description", help), parents=parents, **kw)

    run = command("run", "refresh one or every source through Dagster", epilog=RUN_HELP)
    run.add_argument("--source", help="only this source")
    run.add_argument("--tier", choices=["hot", "warm", "cold"], help="only pages of this tier")
    run.add_argument("--json", action="store_true", help="one JSON object per source")
    run.add_argument(
        "--allow-spike",
        action="store_true",
        # The tag is defs.checks.ALLOW_SPIKE_TAG (not imported here: it loads Dagster).
        help="tag the run freshness/allow-spike=true: index a reviewed change spike (the check then warns)",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="print Dagster's event log (the UI always has it)")
    run.set_defaults(func=_run)
    _read_commands(command)

    # No --sources: the demo writes its own sources file into its home.
    demo = command("demo", "refresh the shipped demo site twice and search it", parents=[])
    demo.add_argument(
        "--home",
        default="demo_home",
        help="state folder (default ./demo_home); must be absent, empty, or made by an earlier demo",
    )
    demo.add_argument(
        "--embedder",
        default="local",
        choices=["local", "hashing"],
        help="local: the shipped all-MiniLM-L6-v2 model (default); hashing: no model, instant, no meaning",
    )
    demo.set_defaults(func=_demo)

    rec = command("reconcile", "compare the manifest with the vector store; --fix repairs")
    rec.add_argument("--source", help="only this source")
    rec.add_argument("--fix", action="store_true", help="delete orphans, re-upsert missing and mismatched records")
    rec.add_argument("--json", action="store_true", help="one JSON object per source")
    rec.set_defaults(func=_reconcile)

    deliver = command("deliver", "send waiting change events to the configured webhooks")
    deliver.set_defaults(func=_deliver)
    return p


def _read_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """The commands that only read the index and the state."""
    dump = command("dump", "every record in the vector index, as JSON lines")
    dump.add_argument("--source", help="only this source's records (default: every source)")
    dump.set_defaults(func=_dump)

    search = command("search", "top sections for a query")
    search.add_argument("query", type=_query, help="the question, in words (not empty)")
    search.add_argument("-k", type=_positive_int, default=5, help="results to return (at least 1; default 5)")
    search.add_argument("--source", help="search only this source (default: every source)")
    search.add_argument("--json", action="store_true", help="the results as one JSON list")
    search.set_defaults(func=_search)

    status = command("status", "per source: pages, sections, last run")
    status.add_argument("--json", action="store_true", help="every figure, as one JSON list (one object per source)")
    status.set_defaults(func=_status)

    resolve = command("resolve", "follow a section key's redirects to its current text")
    resolve.add_argument("key", help="a section key, as search results and citations give it")
    resolve.add_argument("--source", help="look only in this source (default: every source, in order)")
    resolve.add_argument("--json", action="store_true", help="the section as one JSON object")
    resolve.set_defaults(func=_resolve)

    weak = command("weak", "searches whose best match was weak (last 90 days)")
    weak.add_argument("--days", type=float, default=90, help="how far back to look, in days (default 90)")
    weak.add_argument("--json", action="store_true", help="the searches as one JSON list")
    weak.set_defaults(func=_weak)


def _names(settings: Settings, only: str | None) -> list[str]:
    return [settings.source(only).name] if only else [s.name for s in settings.sources]


COUNTS = ("crawled", "new", "changed", "unchanged", "gone", "errors", "skipped", "embedded", "payload_updated", "deleted")
SHOWN_ERRORS = 10


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from . import progress
    from .defs.assets import ALLOW_SPIKE_TAG
    from .defs.runner import run_refresh

    progress.attach()
    tags = {ALLOW_SPIKE_TAG: "true"} if args.allow_spike else None
    failed = 0
    for name in _names(settings, args.source):
        # The summary below carries failures, checks and page errors; the full event log
        # (tracebacks included) is in the instance, and on the console with --verbose.
        outcome = run_refresh(name, tier=args.tier, tags=tags, log_level="INFO" if args.verbose else "CRITICAL")
        if args.json:
            print(json.dumps({"source": name, **outcome}, sort_keys=True, default=str))
        else:
            print("\n".join(run_lines(name, outcome)))
        failed += outcome.get("status") != "success"
    return 1 if failed else 0


def run_lines(name: str, outcome: dict[str, Any]) -> list[str]:
    """`freshness run`'s text for one source: the counts the run produced (never made-up
    zeros), its status when not a success, the checks that did not pass, the pages in error."""
    shown = [k for k in COUNTS if outcome.get(k) is not None and (k != "skipped" or outcome[k])]  # skips when any
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


def _dump(args: argparse.Namespace, settings: Settings) -> int:
    from .pipeline.context import SourceContext, namespace

    for name in _names(settings, args.source):
        ctx = SourceContext.open(settings, name, read_only=True)
        state = ctx.store.source_state(name)
        if state is None:
            continue
        for rec in ctx.vectors.records(namespace(name, state.active_version), committed=True):
            print(json.dumps(rec, sort_keys=True, default=str))
        ctx.close()
    return 0


def _search(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 1, before any model is loaded, when nothing is indexed yet."""
    from .pipeline.search import indexed_sources

    names = _names(settings, args.source)
    if not indexed_sources(settings, names):
        if args.json:
            print("[]")
        where = f" (sources file {os.environ['FRESHNESS_SOURCES']})" if os.environ.get("FRESHNESS_SOURCES") else ""
        print(
            f"the index is empty: nothing of {', '.join(names)} is indexed yet{where}. "
            "`freshness run` crawls the sources and fills it",
            file=sys.stderr,
        )
        return 1
    from .pipeline.search import search, weak_threshold

    hits = search(settings, args.query, k=args.k, source=args.source)
    if args.json:
        print(json.dumps([h.as_dict() for h in hits], indent=1))
        return 0
    for i, h in enumerate(hits, 1):
        span = f"  chars {h.start}-{h.end}" if h.start is not None else "  (not in the live page text)"
        as_of = f"  as of {h.as_of}" if h.as_of else ""
        print(f"{i}. {h.score:.3f}  {h.url}  [{h.heading_path}]{as_of}  key={h.key}{span}")
        print(f"   {h.text[:160].replace(chr(10), ' ')}")
    if not hits:
        print("no results")
    threshold = weak_threshold(settings)
    best = hits[0].score if hits else None
    weak = bool(hits) and threshold is not None and (best is None or best < threshold)
    print(
        f"best cosine similarity: {'-' if best is None else f'{best:.3f}'}"
        + (f" (weak match: under {threshold:.2f}; recorded, see `freshness weak`)" if weak else "")
    )
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from .pipeline.source_status import source_status

    rows = [source_status(settings, s.name) for s in settings.sources]
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    for r in rows:
        last = r.get("last_run") or {}
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last["finished_at"])) if last else "never"
        print(f"{r['source']}: {r['pages_live']} pages, {r['sections_indexed']} sections indexed; last run {when}")
        if not r["index"]["clean"]:
            print(f"  INDEX NOT HEALTHY: {r['index']['summary']}")
        if last:
            c: dict[str, Any] = last["counts"]
            print(
                "  "
                + " ".join(f"{k}: {c.get(k, 0)}" for k in ("crawled", "new", "changed", "unchanged", "gone", "errors"))
            )
        for url, n in r.get("flapping", []):
            print(f"  flapping: {url} re-embedded in {n} runs")
        for url, why in r.get("flagged", []):
            print(f"  flagged: {url}: {why}")
        _print_freshness(r, settings.source(r["source"]).checks)
    return 0


def _print_freshness(r: dict[str, Any], checks: CheckPolicy) -> None:
    import pandas as pd

    from .defs.metrics_assets import history_table

    if r.get("freshness_history"):
        f = r["freshness"]
        print(f"  freshness score {f['score']:.3f}")
        if f["alert"]:
            print("\n".join(alert_lines(f, checks)))
        table = history_table(pd.DataFrame(r["freshness_history"])).tail(5)
        print("    " + table.to_string(index=False, na_rep="-").replace("\n", "\n    "))
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


def alert_lines(measured: dict[str, Any], checks: CheckPolicy) -> list[str]:
    """Which figures put the latest score under `checks.freshness_alert`, and why."""
    from .core.alerts import alert_reasons

    reasons = alert_reasons(measured, lag_target_s=checks.lag_target_h * 3600, age_target_s=checks.age_target_d * 86400)
    head = f"  ALERT: score {measured['score']:.3f} is under checks.freshness_alert {checks.freshness_alert:g}"
    return [head + (", because of:" if reasons else ""), *(f"    {why}" for why in reasons)]


def _reconcile(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when every source is clean (or was fixed clean), 1 when drift remains."""
    from .pipeline.context import SourceContext
    from .pipeline.reconcile import reconcile

    drift = 0
    for name in _names(settings, args.source):
        ctx = SourceContext.open(settings, name)
        try:
            report = reconcile(ctx, fix=args.fix)
            if args.fix and not report.clean:
                drift += not reconcile(ctx).clean
            else:
                drift += not report.clean
        finally:
            ctx.close()
        if args.json:
            print(json.dumps(report.as_dict(), sort_keys=True))
            continue
        found = f"orphans: {len(report.orphans)} missing: {len(report.missing)} mismatched: {len(report.mismatched)}"
        fixed = f" fixed: {report.fixed}" if args.fix else ""
        print(f"{name} ({report.namespace or 'nothing indexed'}, {report.records} records): {found}{fixed}")
        if report.damage:
            print(f"  {report.damage}")
        for kind in ("orphans", "missing", "mismatched"):
            for rid in getattr(report, kind)[:20]:
                print(f"  {kind}: {rid}")
    return 1 if drift else 0


def _weak(args: argparse.Namespace, settings: Settings) -> int:
    import pandas as pd

    from .adapters.state.metrics_store import MetricsStore
    from .adapters.state.store import StateStore
    from .config import state_url

    store = StateStore(state_url(settings), read_only=True)
    try:
        frame = MetricsStore(store).weak_queries(days=args.days)
    finally:
        store.close()
    if args.json:
        rows = [
            {**r, "best_score": None if pd.isna(r["best_score"]) else round(float(r["best_score"]), 4)}
            for r in frame.to_dict(orient="records")
        ]
        print(json.dumps(rows, indent=1))
        return 0
    for r in frame.itertuples(index=False):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at))
        score = "-" if r.best_score is None or r.best_score != r.best_score else f"{r.best_score:.3f}"
        print(f"{when}  {score}  {r.query!r}  best: {r.best_url or '-'}")
    if frame.empty:
        print("no weak matches")
    return 0


def _deliver(args: argparse.Namespace, settings: Settings) -> int:
    from .adapters.state.metrics_store import MetricsStore
    from .adapters.state.store import StateStore
    from .adapters.webhooks import deliver
    from .config import state_url

    if not settings.webhooks:
        print("no webhooks configured")
        return 0
    store = StateStore(state_url(settings))
    failed = 0
    try:
        with store.lock("_webhooks", wait=True):
            for hook in settings.webhooks:
                d = deliver(MetricsStore(store), hook)
                print(f"{hook.url}: delivered {d.delivered}, {d.backlog} waiting" + (f"; {d.error}" if d.error else ""))
                failed += d.error is not None
    finally:
        store.close()
    return 1 if failed else 0


def _demo(args: argparse.Namespace) -> int:
    from . import progress
    from .demo.run import run_demo

    progress.attach()
    return run_demo(Path(args.home), embedder=args.embedder)


def _resolve(args: argparse.Namespace, settings: Settings) -> int:
    from .pipeline.search import resolve

    found = resolve(settings, args.key, source=args.source)
    if found is None:
        print(f"no current section for key {args.key!r} (unknown, or its page is gone)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(found, indent=1))
    else:
        hops = " -> ".join([*found["redirects"], found["key"]])
        print(f"{hops}\n{found['url']}  [{found['heading_path']}]\n\n{found['text']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
