"""The commands: each parses its options, makes one call on the public entry point
(`freshness_pipeline.api`: `open_index`, then `refresh`, `search`, `status`, ...) and prints
the answer (`render.py`, or JSON with `--json`). The entry point imports the work inside
each call, so a command loads only what it uses (`status` and `search` never load Dagster)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import IO, Annotated, Any, BinaryIO, Literal, TextIO, overload

import typer

from .. import api
from . import render

TOP_HELP = """Keep a search index true to a documentation site. `freshness run` recrawls the
sites of the sources file and re-embeds only what changed; `search`, `resolve` and `status`
read the index. State lives in $DAGSTER_HOME (default ./dagster_home)."""

RUN_HELP = """Exit status: 0 when every run succeeded, even when non-blocking checks failed
with WARN or ERROR (each is printed as a `check` line, and the counts are in --json);
1 when a run failed or a blocking check (change_spike) stopped it before indexing."""

PROGRESS_VALUES = ("bar", "log", "off")  # $FRESHNESS_PROGRESS (progress.py)


class _Command(typer.core.TyperCommand):
    """A command whose usage line names its arguments plainly (`QUERY`, not `{query}`)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # typer's own click Context
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = (param.metavar or param.name or "").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"freshness {__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="freshness",
    help=TOP_HELP,
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # plain click help: no `<bool>` after every flag
)

SourcesFile = Annotated[
    str | None,
    typer.Option(
        "--sources",
        metavar="FILE",
        help="sources file (default $FRESHNESS_SOURCES, else sources.yaml); before or after the command",
    ),
]
Only = Annotated[str | None, typer.Option("--source", metavar="NAME", help="only this source (default: every source)")]


DemoEmbedder = Literal["local", "hashing"]
DumpFormat = Literal["jsonl", "parquet", "csv"]


def _json(help: str) -> Any:
    return typer.Option("--json", help=help)


@app.callback()
def _top(
    ctx: typer.Context,
    sources: SourcesFile = None,
    version: Annotated[
        bool, typer.Option("--version", help="print the version and exit", callback=_version, is_eager=True)
    ] = False,
) -> None:
    ctx.obj = sources


def _index(ctx: typer.Context, sources: str | None, *, create: bool = False) -> api.Index:
    """The index of $DAGSTER_HOME for the sources file given after the command, else before
    it. Only the commands that write (`run`, `migrate`) make a home that does not exist.
    The chosen file stays in `$FRESHNESS_SOURCES` for the rest of the process, as the
    command line has always left it (a script may call the library next)."""
    index = api.open_index(None, sources or ctx.obj, create=create)
    if sources or ctx.obj:
        os.environ["FRESHNESS_SOURCES"] = str(index.sources_file)
    os.environ.setdefault("DAGSTER_HOME", str(index.home))
    return index


def _check_environment() -> None:
    """Unknown values of the variables `run` and `demo` read are errors, not ignored."""
    value = os.environ.get("FRESHNESS_PROGRESS", "")
    if value and value not in PROGRESS_VALUES:
        raise api.ConfigError(f"$FRESHNESS_PROGRESS is {value!r}; allowed: {', '.join(PROGRESS_VALUES)} (or unset)")


@app.command(cls=_Command, help="refresh one or every source through Dagster", epilog=RUN_HELP)
def run(
    ctx: typer.Context,
    source: Only = None,
    tier: Annotated[api.Tier | None, typer.Option("--tier", help="only pages of this tier")] = None,
    as_json: Annotated[bool, _json("one JSON object per source")] = False,
    allow_spike: Annotated[
        bool,
        typer.Option(
            "--allow-spike",
            help="index a change spike you reviewed (the blocking check then warns; the run is tagged "
            "freshness/allow-spike=true)",
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="print Dagster's event log (the UI always has it)")
    ] = False,
    submit: Annotated[
        str | None,
        typer.Option(
            "--submit",
            metavar="URL",
            help="submit the runs to the Dagster deployment whose webserver is at URL and wait for them "
            "(default $FRESHNESS_DAGSTER_URL; unset: run them here, on $DAGSTER_HOME's instance)",
            callback=lambda url: url if url is None else _not_empty(url),
        ),
    ] = None,
    sources: SourcesFile = None,
) -> int:
    from .. import progress

    _check_environment()
    index = _index(ctx, sources, create=True)
    names = index.names(source)
    if not verbose:  # with --verbose Dagster's console log says each stage's line
        progress.attach()
    failed = 0
    # One run per source, each printed as it ends. The summary carries failures, checks and
    # page errors; the full event log (tracebacks included) is in the instance, and on the
    # console with --verbose.
    refreshes = index.refresh_all(names, tier=tier, allow_spike=allow_spike, verbose=verbose, submit=submit)
    try:
        for name, outcome in refreshes:
            if as_json:
                print(json.dumps({"source": name, **outcome}, sort_keys=True, default=str), flush=True)
            else:
                print("\n".join(render.run_lines(name, outcome)), flush=True)
            failed += outcome.get("status") != "success"
    except api.Interrupted as stop:
        if not stop.committed:  # `entry`: "freshness: interrupted: ..." and the exit of a SIGINT
            raise KeyboardInterrupt(str(stop)) from None  # (Python exits so for this class only)
        print(f"freshness: interrupted: {stop}", file=sys.stderr)
    return 1 if failed else 0


@app.command(
    cls=_Command,
    help="refresh with the pages the quarantine holds taken as they now read: those of --kind, the URLs "
    "given, or (neither) every held page of the source; the run is tagged freshness/release",
    epilog=RUN_HELP,
)
def release(
    ctx: typer.Context,
    pages: Annotated[list[str] | None, typer.Argument(metavar="[URL]...", help="held pages to take")] = None,
    source: Only = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option("--kind", metavar="KIND", help="take the held pages of this kind (gone, rewritten, ...)"),
    ] = None,
    allow_spike: Annotated[
        bool, typer.Option("--allow-spike", help="let the change spike of what is taken through as well")
    ] = False,
    as_json: Annotated[bool, _json("one JSON object per source")] = False,
    sources: SourcesFile = None,
) -> int:
    index = _index(ctx, sources, create=True)
    failed = 0
    for name, outcome in index.release(index.names(source), kinds=kinds, pages=pages, allow_spike=allow_spike):
        if as_json:
            print(json.dumps({"source": name, **outcome}, sort_keys=True, default=str), flush=True)
        else:
            print("\n".join(render.run_lines(name, outcome)), flush=True)
        failed += outcome.get("status") != "success"
    return 1 if failed else 0


@app.command(
    cls=_Command,
    help="every record in the vector index, as JSON lines; with --table, one of the tables of the "
    "notebook frames (manifest: one row per section; history, golden, golden_misses, weak, runs, review) "
    "in the --format asked. Says on standard error what it wrote.",
)
def dump(
    ctx: typer.Context,
    source: Only = None,
    table: Annotated[
        str, typer.Option("--table", help="records (the vector records), or a table: manifest, history, ...")
    ] = "records",
    fmt: Annotated[
        DumpFormat, typer.Option("--format", help="jsonl, parquet or csv (the records: jsonl only)")
    ] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="write here (default: standard output)")
    ] = None,
    sources: SourcesFile = None,
) -> int:
    if table not in ("records", *api.TABLES):
        raise typer.BadParameter(f"no table {table!r}: records, {', '.join(api.TABLES)}", param_hint="--table")
    if table == "records" and fmt != "jsonl":
        raise typer.BadParameter(
            "the vector records are JSON lines only; for Parquet or CSV pass a table (--table manifest)",
            param_hint="--format",
        )
    index = _index(ctx, sources)
    where = str(output) if output else "standard output"
    if table == "records":
        with _output(output, "w") if output else contextlib.nullcontext(sys.stdout) as out:
            n = 0
            for rec in index.records(source):
                print(json.dumps(rec, sort_keys=True, default=str), file=out)
                n += 1
        print(f"wrote {n} records to {where} (jsonl)", file=sys.stderr)
        return 0
    if output is None and fmt == "parquet" and sys.stdout.isatty():
        raise typer.BadParameter("Parquet is binary: pass --output FILE (or redirect standard output)")
    with _output(output, "wb") if output else contextlib.nullcontext(sys.stdout.buffer) as out:
        n = index.dump_table(out, table, fmt, source)
    print(f"wrote {n} rows of {table} to {where} ({fmt})", file=sys.stderr)
    return 0


@overload
def _output(path: Path, mode: Literal["w"]) -> TextIO: ...
@overload
def _output(path: Path, mode: Literal["wb"]) -> BinaryIO: ...
def _output(path: Path, mode: Literal["w", "wb"]) -> IO[Any]:
    """`path` opened for writing; a path that cannot be written is one line naming it."""
    try:
        return open(path, mode)  # noqa: SIM115 - the caller's `with` closes it
    except OSError as exc:
        raise api.ConfigError(f"--output {path}: cannot write there: {exc.strerror or exc}") from None


def _not_empty(text: str) -> str:
    if not text.strip():
        raise typer.BadParameter("must not be empty")
    return text


def _positive(value: int) -> int:
    if value < 1:
        raise typer.BadParameter(f"must be at least 1, not {value}")
    return value


def _days(value: float) -> float:
    if not value >= 1:  # NaN too
        raise typer.BadParameter(f"must be at least 1 (a day), not {value:g}")
    return value


@app.command(cls=_Command, help="top sections for a query")
def search(
    ctx: typer.Context,
    query: Annotated[
        str, typer.Argument(metavar="QUERY", help="the question, in words (not empty)", callback=_not_empty)
    ],
    k: Annotated[int, typer.Option("-k", metavar="N", help="results to return (at least 1)", callback=_positive)] = 5,
    source: Only = None,
    as_json: Annotated[bool, _json("the results as one JSON list")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="say which part (vector, full-text or both) found each result")
    ] = False,
    sources: SourcesFile = None,
) -> int:
    """Exit 1, before any model is loaded, when nothing is indexed yet."""
    index = _index(ctx, sources)
    names = index.names(source)
    if not index.indexed(names):
        if as_json:
            print("[]")
        print(
            f"the index is empty: nothing of {', '.join(names)} is indexed yet (sources file {index.sources_file}). "
            "`freshness run` crawls the sources and fills it",
            file=sys.stderr,
        )
        return 1
    hits = index.search(query, k=k, source=source, explain=explain)
    if as_json:
        print(json.dumps([h.as_dict() for h in hits], indent=1))
    else:
        render.print_hits(hits, index.weak_threshold())
    return 0


@app.command(cls=_Command, help="per source: pages, sections, last attempt and last success")
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, _json("every figure, as one JSON list (one object per source)")] = False,
    sources: SourcesFile = None,
) -> int:
    index = _index(ctx, sources)
    rows = index.status()
    if as_json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    for r in rows:
        render.print_status(r, index.settings.source(r["source"]).checks)
    for u in index.unlisted():
        render.print_unlisted(u.source, u.sections)
    return 0


@app.command(cls=_Command, help="follow a section key's redirects to its current text")
def resolve(
    ctx: typer.Context,
    key: Annotated[
        str,
        typer.Argument(
            metavar="KEY",
            help="a section key, as search results and citations give it (not empty)",
            callback=_not_empty,
        ),
    ],
    source: Only = None,
    as_json: Annotated[bool, _json("the section as one JSON object")] = False,
    sources: SourcesFile = None,
) -> int:
    found = _index(ctx, sources).resolve(key, source=source)
    if found is None:
        print(f"no current section for key {key!r} (unknown, removed, or rewritten as it moved)", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(found, indent=1))
    else:
        hops = " -> ".join([*found["redirects"], found["key"]])
        print(f"{hops}\n{found['url']}  [{found['heading_path']}]\n\n{found['text']}")
    return 0


@app.command(cls=_Command, help="searches whose best match was weak (last 90 days)")
def weak(
    ctx: typer.Context,
    days: Annotated[
        float,
        typer.Option("--days", metavar="DAYS", help="how far back to look, in days (at least 1)", callback=_days),
    ] = 90,
    as_json: Annotated[bool, _json("the searches as one JSON list")] = False,
    sources: SourcesFile = None,
) -> int:
    rows = _index(ctx, sources).weak(days)
    if as_json:
        print(json.dumps(rows, indent=1))
    else:
        render.print_weak(rows)
    return 0


# No --sources: the demo writes its own sources file into its home.
@app.command(cls=_Command, help="refresh the shipped demo site twice and search it")
def demo(
    ctx: typer.Context,
    home: Annotated[
        str,
        typer.Option(
            "--home",
            metavar="DIR",
            help="state folder; must be absent, empty, or made by an earlier demo",
        ),
    ] = "demo_home",
    embedder: Annotated[
        DemoEmbedder,
        typer.Option(
            "--embedder",
            help="local: the shipped all-MiniLM-L6-v2 model; hashing: no model, no meaning (the [tiktoken] extra)",
        ),
    ] = "local",
) -> int:
    if ctx.obj:
        raise api.ConfigError("the demo writes its own sources file into --home; drop --sources")
    from .. import progress
    from ..demo.run import run_demo

    _check_environment()
    progress.attach()
    return run_demo(Path(home), embedder=embedder)


@app.command(cls=_Command, help="compare the manifest with the vector store; --fix repairs")
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
    index = _index(ctx, sources)
    drift = 0
    for name in index.names(source):
        report, clean = index.reconcile(name, fix=fix)
        drift += not clean
        if as_json:
            print(json.dumps(report.as_dict(), sort_keys=True))
        else:
            render.print_reconcile(name, report, fix=fix)
    return 1 if drift else 0


@app.command(
    cls=_Command,
    help="drop, for good, the vectors, state and Dagster partition of a source taken out of the sources file",
)
def retire(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="the source, as `freshness status` names it")],
    yes: Annotated[bool, typer.Option("--yes", help="required: what is dropped cannot be brought back")] = False,
    sources: SourcesFile = None,
) -> int:
    if not yes:
        raise typer.BadParameter(f"retiring drops {name}'s vectors and state for good: pass --yes")
    done = _index(ctx, sources).retire(name)
    print("\n".join(render.retired_lines(done)))
    return 0


@app.command(cls=_Command, help="send waiting change events to the configured webhooks")
def deliver(ctx: typer.Context, sources: SourcesFile = None) -> int:
    deliveries = _index(ctx, sources).deliver()
    if not deliveries:
        print("no webhooks configured")
    for d in deliveries:
        print(f"{d.url}: delivered {d.delivered}, {d.backlog} waiting" + (f"; {d.error}" if d.error else ""))
    return 1 if any(d.error is not None for d in deliveries) else 0


@app.command(cls=_Command, help="bring the state store's schema to the newest revision (runs do it too)")
def migrate(ctx: typer.Context, sources: SourcesFile = None) -> int:
    print(_index(ctx, sources, create=True).migrate())
    return 0
