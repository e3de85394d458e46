"""The commands: each parses its options, makes one call into `pipeline/` (or, for `run`,
`defs/runner.py`) and prints the answer (`render.py`, or JSON with `--json`). The work is
imported inside each command, so a command loads only what it uses (`status` never loads
Dagster)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from ..config import Settings, dagster_home, load_settings
from ..defs.instance import write_instance_config
from . import render

RUN_HELP = """Exit status: 0 when every run succeeded, even when non-blocking checks failed
with WARN or ERROR (each is printed as a `check` line, and the counts are in --json);
1 when a run failed or a blocking check (change_spike) stopped it before indexing."""

app = typer.Typer(
    name="freshness",
    help="`freshness`: the command line operators and scripts use. Each command is one library "
    "call plus formatting; `run` goes through Dagster so every refresh shows up in the UI.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)

SourcesFile = Annotated[
    str | None,
    typer.Option(
        "--sources", help="sources file (default $FRESHNESS_SOURCES or sources.yaml); before or after the command"
    ),
]
Only = Annotated[str | None, typer.Option("--source", help="only this source")]


def _json(help: str) -> Any:
    return typer.Option("--json", help=help)


@app.callback()
def _top(ctx: typer.Context, sources: SourcesFile = None) -> None:
    ctx.obj = sources


def _settings(ctx: typer.Context, sources: str | None) -> Settings:
    """The sources file given after the command, else before it; the Dagster home made ready."""
    chosen = sources or ctx.obj
    if chosen:
        os.environ["FRESHNESS_SOURCES"] = str(Path(chosen).resolve())
    os.environ.setdefault("DAGSTER_HOME", str(dagster_home()))
    write_instance_config(dagster_home())  # a home without dagster.yaml gets the project's (defs/instance.py)
    return load_settings()


def _names(settings: Settings, only: str | None) -> list[str]:
    return [settings.source(only).name] if only else [s.name for s in settings.sources]


@app.command(help="refresh one or every source through Dagster", epilog=RUN_HELP)
def run(
    ctx: typer.Context,
    source: Only = None,
    tier: Annotated[
        Literal["hot", "warm", "cold"] | None, typer.Option("--tier", help="only pages of this tier")
    ] = None,
    as_json: Annotated[bool, _json("one JSON object per source")] = False,
    allow_spike: Annotated[
        bool,
        typer.Option(
            "--allow-spike",
            help="tag the run freshness/allow-spike=true: index a reviewed change spike (the check then warns)",
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="print Dagster's event log (the UI always has it)")
    ] = False,
    sources: SourcesFile = None,
) -> int:
    from .. import progress
    from ..defs.runner import run_refresh
    from ..defs.tags import ALLOW_SPIKE_TAG

    settings = _settings(ctx, sources)
    progress.attach()
    tags = {ALLOW_SPIKE_TAG: "true"} if allow_spike else None
    failed = 0
    for name in _names(settings, source):
        # The summary carries failures, checks and page errors; the full event log
        # (tracebacks included) is in the instance, and on the console with --verbose.
        outcome = run_refresh(name, tier=tier, tags=tags, log_level="INFO" if verbose else "CRITICAL")
        if as_json:
            print(json.dumps({"source": name, **outcome}, sort_keys=True, default=str))
        else:
            print("\n".join(render.run_lines(name, outcome)))
        failed += outcome.get("status") != "success"
    return 1 if failed else 0


@app.command(help="every record in the vector index, as JSON lines")
def dump(
    ctx: typer.Context,
    source: Annotated[
        str | None, typer.Option("--source", help="only this source's records (default: every source)")
    ] = None,
    sources: SourcesFile = None,
) -> int:
    from ..pipeline.search import dump as records

    settings = _settings(ctx, sources)
    for name in _names(settings, source):
        for rec in records(settings, name):
            print(json.dumps(rec, sort_keys=True, default=str))
    return 0


def _query(text: str) -> str:
    if not text.strip():
        raise typer.BadParameter("must not be empty: say what to search for")
    return text


def _positive(value: int) -> int:
    if value < 1:
        raise typer.BadParameter(f"must be at least 1, not {value}")
    return value


@app.command(help="top sections for a query")
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="the question, in words (not empty)", callback=_query)],
    k: Annotated[int, typer.Option("-k", help="results to return (at least 1; default 5)", callback=_positive)] = 5,
    source: Annotated[
        str | None, typer.Option("--source", help="search only this source (default: every source)")
    ] = None,
    as_json: Annotated[bool, _json("the results as one JSON list")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="say which part (vector, full-text or both) found each result")
    ] = False,
    sources: SourcesFile = None,
) -> int:
    """Exit 1, before any model is loaded, when nothing is indexed yet."""
    from ..pipeline.search import indexed_sources

    settings = _settings(ctx, sources)
    names = _names(settings, source)
    if not indexed_sources(settings, names):
        if as_json:
            print("[]")
        where = f" (sources file {os.environ['FRESHNESS_SOURCES']})" if os.environ.get("FRESHNESS_SOURCES") else ""
        print(
            f"the index is empty: nothing of {', '.join(names)} is indexed yet{where}. "
            "`freshness run` crawls the sources and fills it",
            file=sys.stderr,
        )
        return 1
    from ..pipeline.search import search as top_sections
    from ..pipeline.search import weak_threshold

    hits = top_sections(settings, query, k=k, source=source, explain=explain)
    if as_json:
        print(json.dumps([h.as_dict() for h in hits], indent=1))
    else:
        render.print_hits(hits, weak_threshold(settings))
    return 0


@app.command(help="per source: pages, sections, last run")
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, _json("every figure, as one JSON list (one object per source)")] = False,
    sources: SourcesFile = None,
) -> int:
    from ..pipeline.source_status import source_status

    settings = _settings(ctx, sources)
    rows = [source_status(settings, s.name) for s in settings.sources]
    if as_json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    for r in rows:
        render.print_status(r, settings.source(r["source"]).checks)
    return 0


@app.command(help="follow a section key's redirects to its current text")
def resolve(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="a section key, as search results and citations give it")],
    source: Annotated[
        str | None, typer.Option("--source", help="look only in this source (default: every source, in order)")
    ] = None,
    as_json: Annotated[bool, _json("the section as one JSON object")] = False,
    sources: SourcesFile = None,
) -> int:
    from ..pipeline.search import resolve as current

    found = current(_settings(ctx, sources), key, source=source)
    if found is None:
        print(f"no current section for key {key!r} (unknown, or its page is gone)", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(found, indent=1))
    else:
        hops = " -> ".join([*found["redirects"], found["key"]])
        print(f"{hops}\n{found['url']}  [{found['heading_path']}]\n\n{found['text']}")
    return 0


@app.command(help="searches whose best match was weak (last 90 days)")
def weak(
    ctx: typer.Context,
    days: Annotated[float, typer.Option("--days", help="how far back to look, in days (default 90)")] = 90,
    as_json: Annotated[bool, _json("the searches as one JSON list")] = False,
    sources: SourcesFile = None,
) -> int:
    from ..pipeline.history import weak_searches

    rows = weak_searches(_settings(ctx, sources), days=days)
    if as_json:
        print(json.dumps(rows, indent=1))
    else:
        render.print_weak(rows)
    return 0


# No --sources: the demo writes its own sources file into its home.
@app.command(help="refresh the shipped demo site twice and search it")
def demo(
    ctx: typer.Context,
    home: Annotated[
        str,
        typer.Option(
            "--home", help="state folder (default ./demo_home); must be absent, empty, or made by an earlier demo"
        ),
    ] = "demo_home",
    embedder: Annotated[
        Literal["local", "hashing"],
        typer.Option(
            "--embedder",
            help="local: the shipped all-MiniLM-L6-v2 model (default); hashing: no model, instant, no meaning",
        ),
    ] = "local",
) -> int:
    if ctx.obj:
        print("error: the demo writes its own sources file into --home; drop --sources", file=sys.stderr)
        return 2
    from .. import progress
    from ..demo.run import run_demo

    progress.attach()
    return run_demo(Path(home), embedder=embedder)


@app.command(help="compare the manifest with the vector store; --fix repairs")
def reconcile(
    ctx: typer.Context,
    source: Only = None,
    fix: Annotated[
        bool, typer.Option("--fix", help="delete orphans, re-upsert missing and mismatched records")
    ] = False,
    as_json: Annotated[bool, _json("one JSON object per source")] = False,
    sources: SourcesFile = None,
) -> int:
    """Exit 0 when every source is clean (or was fixed clean), 1 when drift remains."""
    from ..pipeline.reconcile import reconcile_source

    settings = _settings(ctx, sources)
    drift = 0
    for name in _names(settings, source):
        report, clean = reconcile_source(settings, name, fix=fix)
        drift += not clean
        if as_json:
            print(json.dumps(report.as_dict(), sort_keys=True))
        else:
            render.print_reconcile(name, report, fix=fix)
    return 1 if drift else 0


@app.command(help="send waiting change events to the configured webhooks")
def deliver(ctx: typer.Context, sources: SourcesFile = None) -> int:
    from ..pipeline.delivery import deliver_all

    deliveries = deliver_all(_settings(ctx, sources))
    if not deliveries:
        print("no webhooks configured")
    for d in deliveries:
        print(f"{d.url}: delivered {d.delivered}, {d.backlog} waiting" + (f"; {d.error}" if d.error else ""))
    return 1 if any(d.error is not None for d in deliveries) else 0


@app.command(help="bring the state store's schema to the newest revision (runs do it too)")
def migrate(ctx: typer.Context, sources: SourcesFile = None) -> int:
    from ..pipeline.maintenance import migrate as upgrade

    print(upgrade(_settings(ctx, sources)))
    return 0
