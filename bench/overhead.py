"""What a refresh costs a user beyond its work: `python -m bench.overhead` (`make bench-overhead`).

Serves two sites on loopback, the demo's (five pages) and a generated one (`bench/site.py`,
`--pages`, 150 by default), and times each command in a fresh process, as a user, a sensor
or a script runs it: the first `freshness run` (launched; in-process too, in a home of its
own), then `--pairs` alternating pairs of quiet runs (nothing changed), launched into the
code location (the default) and in-process (`FRESHNESS_LAUNCH=in-process`), then
`freshness status` and a cold `freshness search`. `--commands daemon`: `--pairs` quiet runs
submitted as a sensor submits them, which a `dagster-daemon` dequeues and launches through
its own code server (a sensor's, a schedule's, a backfill's and the UI's runs go this way).
Each run's line shows its wall time beside its own work (`seconds` of `freshness run
--json`: discovery, fetch, sections, plan, index), the overhead (wall - work) and the ratio,
then where the wall went by the run's record in the instance (`_phases`).

`--commands floor`: Dagster alone, a job of the refresh job's shape whose steps do nothing
(`bench/dagster_floor.py`), run in a fresh process as the quiet in-process runs are run and
alternating with them: its wall is what Dagster costs such a run on this host, and a quiet
in-process run's overhead beyond it is this project's own.

`--baseline DIR` runs every command a second time, alternating, with the package
`freshness_pipeline` imported from DIR (e.g. `git archive <commit> freshness_pipeline | tar
-x -C DIR`): a before/after in the same minutes, so that the host's load is shared.

`--profile DIR` records every command with `py-spy record --subprocesses` (the command,
its code server, the run worker, step processes: every process) into DIR, and prints where
each command's samples went: imports, the instance, code-location loads, event writes,
checks, metrics, the pipeline's own work, LanceDB. The profile slows what it samples: take
the times from a run without it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .site import SiteSpec, serve

QUERY = "how to configure the request timeout"
FLOOR = "floor"  # the command of `--commands floor`: bench/dagster_floor.py
DAGSTER_SUCCESS = "SUCCESS"  # a finished run's status
PR_SET_CHILD_SUBREAPER = 36  # prctl(2)

# Where a profile's sample went: the first rule (in this order) one of whose patterns is in
# one of the sample's frames. A step's event write is an event write, its import an import.
BREAKDOWN: list[tuple[str, tuple[str, ...]]] = [
    ("imports", ("_find_and_load", "_call_with_frames_removed (<frozen importlib")),
    ("LanceDB open", ("lancedb/",)),
    (
        "code-location loads",
        (
            "load_python_module",
            "LoadableTargetOrigin",
            "repository_def",
            "_get_repository_data",
            "Definitions.__init__",
            "resolve_job_def",
            "get_repository_definition",
            "code_location",
            "grpc/server",
            "external_data",
            "snap/",
            "remote_representation",
        ),
    ),
    ("event writes", ("store_event", "handle_new_event", "log_dagster_event", "report_dagster_event")),
    ("checks", ("defs/checks.py", "pipeline/reconcile.py")),
    ("metrics", ("metrics_assets.py", "pipeline/metrics.py", "pipeline/golden.py", "pipeline/history.py")),
    ("pipeline work", ("freshness_pipeline/pipeline/", "freshness_pipeline/core/", "freshness_pipeline/adapters/")),
    ("instance", ("instance/__init__", "DagsterInstance", "storage/", "alembic", "sqlalchemy")),
    ("dagster execution", ("dagster/_core/execution", "dagster/_core/executor")),
]


@dataclass(slots=True)
class Site:
    name: str
    sitemap: str
    stop: Callable[[], None]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=150, help="pages of the generated site")
    p.add_argument("--pairs", type=int, default=2, help="quiet launched/in-process pairs per site")
    p.add_argument("--sites", default="demo,generated", help="comma-separated: demo, generated")
    p.add_argument("--embedder", default="hashing", choices=("hashing", "local"))
    p.add_argument(
        "--commands", default="run,floor,status,search", help="comma-separated: run, floor, status, search, daemon"
    )
    p.add_argument("--profile", type=Path, help="record every command with py-spy into this folder")
    p.add_argument("--baseline", type=Path, help="also run each command with freshness_pipeline from this folder")
    args = p.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(f"uptime: {_uptime()}", flush=True)
    head = f"{'site':<10} {'command':<36} {'wall s':>7} {'work s':>7} {'over s':>7} {'ratio':>6} {'cpu s':>6}  load"
    print(head, flush=True)
    for name in args.sites.split(","):
        with _site(name, args.pages) as site, tempfile.TemporaryDirectory(prefix="freshness-overhead-") as tmp:
            env = _home(Path(tmp), site, args.embedder)
            # The older code gets a home of its own: its state schema may be older than this one.
            base = _home(Path(tmp) / "baseline", site, args.embedder) if args.baseline else {}
            # The in-process first runs too: each first run needs a home nothing indexed yet.
            fresh = {tag: _home(Path(tmp) / f"first{tag.strip(' []')}", site, args.embedder) for tag in _TAGS}
            fresh[FLOOR] = _home(Path(tmp) / FLOOR, site, args.embedder)
            _bench_site(site, env, base, fresh, args)
    print(f"uptime: {_uptime()}", flush=True)
    return 0


_TAGS = ("", " [baseline]")  # the code under test, the older code of --baseline


def _bench_site(
    site: Site, env: dict[str, str], base: dict[str, str], fresh: dict[str, dict[str, str]], args: argparse.Namespace
) -> None:
    commands = args.commands.split(",")
    cases: list[tuple[str, list[str], dict[str, str]]] = []
    floor = ("Dagster alone, in-process", [FLOOR], fresh[FLOOR])
    for _ in range(args.pairs if {"run", FLOOR} & set(commands) else 0):
        if "run" in commands:
            cases.append(("quiet run, launched", ["run", "--json"], {}))
            cases.append(("quiet run, in-process", ["run", "--json"], {"FRESHNESS_LAUNCH": "in-process"}))
        cases += [floor] if FLOOR in commands else []
    cases += [("status", ["status"], {})] if "status" in commands else []
    cases += [("search (cold)", ["search", QUERY], {})] if "search" in commands else []
    variants: list[tuple[str, dict[str, str]]] = [(_TAGS[0], {})]
    if args.baseline:
        variants.append((_TAGS[1], base | {"PYTHONPATH": str(args.baseline.resolve())}))
    # The floor runs none of the pipeline's code (only the run coordinator its dagster.yaml names): no baseline of it.
    cases = [
        (label + tag, cmd, extra | more)
        for label, cmd, extra in cases
        for tag, more in (variants if cmd != [FLOOR] else variants[:1])
    ]
    first = [("first run (launched)" + tag, ["run", "--json"], more) for tag, more in variants]
    if "run" in commands:  # (the launched first runs stay: they index what the other commands read)
        first += [
            ("first run (in-process)" + tag, ["run", "--json"], more | fresh[tag] | {"FRESHNESS_LAUNCH": "in-process"})
            for tag, more in variants
        ]
    first += [("Dagster alone, first run, in-process", [FLOOR], fresh[FLOOR])] if FLOOR in commands else []
    cases = first + cases
    for i, (label, cmd, extra) in enumerate(cases):
        slug = "".join(c if c.isalnum() else "-" for c in label).strip("-")
        out = args.profile / f"{site.name}-{i:02d}-{slug}.txt" if args.profile else None
        started = time.time()
        if cmd == [FLOOR]:
            full = [sys.executable, str(Path(__file__).with_name("dagster_floor.py"))]
        else:
            full = [*(_OLDER_SCRIPT if "PYTHONPATH" in extra else _freshness()), *cmd]
        wall, cpu, stdout = _time(full, {**env, **extra}, out)
        work = _work(stdout) if cmd[0] in ("run", FLOOR) else None
        if work:
            over = f"{wall - work:>7.2f} {wall / work:>6.2f}"
        else:  # the floor has no work: all of its wall is overhead
            over = f"{wall:>7.2f} {'':>6}" if work == 0.0 else f"{'':>7} {'':>6}"
        line = f"{site.name:<10} {label:<36} {wall:>7.2f} {work or 0.0:>7.2f} {over} {cpu:>6.2f}"
        print(f"{line}  {os.getloadavg()[0]:.1f}", flush=True)
        if cmd[0] in ("run", FLOOR):
            home = {**env, **extra}["DAGSTER_HOME"]
            print(f"{'':<10} {'':<36} {_phases(home, stdout, started, started + wall)}", flush=True)
        if out is not None:
            print(f"{'':<10} {'':<36} profile: {_breakdown(out)}", flush=True)
    if "daemon" in commands:  # after the first runs: quiet runs
        _bench_daemon(site, env, variants, args.pairs)


def _bench_daemon(site: Site, env: dict[str, str], variants: list[tuple[str, dict[str, str]]], pairs: int) -> None:
    """Quiet runs submitted as a sensor submits them (the job, the source's partition, no run
    config: `dagster job launch`), which a `dagster-daemon` dequeues and launches through its
    code server; each code in its own home (the daemon's code server loads whichever code is
    first on its path). The wall is the run's, from its submission to its end: what a
    sensor's tick costs beyond the tick, without the submitting command's own start."""
    for tag, more in variants:
        run_env = {**env, **more}
        with _daemon(run_env) as workspace:
            for _ in range(pairs):
                run_id = str(uuid.uuid4())
                tags = json.dumps({"dagster/partition": site.name})
                submit = [sys.executable, "-m", "dagster", "job", "launch", "-w", str(workspace), "-j", "refresh"]
                _time([*submit, "--tags", tags, "--run-id", run_id], run_env, None)
                line, phases = _queued_run(run_env["DAGSTER_HOME"], run_id)
                print(f"{site.name:<10} {'quiet run, daemon' + tag:<36} {line}  {os.getloadavg()[0]:.1f}", flush=True)
                print(f"{'':<10} {'':<36} {phases}", flush=True)


@contextmanager
def _daemon(env: dict[str, str]) -> Iterator[Path]:
    """A `dagster-daemon` on a workspace of the home's (given), from its first heartbeat;
    stopped with its code server (its process group) after the block."""
    from freshness_pipeline.defs.coordinator import daemon_running

    home = Path(env["DAGSTER_HOME"])
    workspace = home / "workspace.yaml"
    module, attribute = "freshness_pipeline.defs.definitions", "defs"
    location = {"module_name": module, "attribute": attribute, "location_name": "freshness_pipeline"}
    where = {**location, "working_directory": str(home)}
    workspace.write_text(yaml.safe_dump({"load_from": [{"python_module": where}]}))
    daemon = Path(sys.executable).with_name("dagster-daemon")
    log = (home / "daemon.log").open("w")
    proc = subprocess.Popen(
        [str(daemon), "run", "-w", str(workspace)], env=env, cwd=home, stdout=log, stderr=log, start_new_session=True
    )
    try:
        with _instance(str(home)) as instance:
            deadline = time.monotonic() + 120
            while not daemon_running(instance):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"dagster-daemon did not start: {(home / 'daemon.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield workspace
    finally:
        for stop in (signal.SIGTERM, signal.SIGKILL):  # SIGTERM: the code server's copy tidies up
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, stop)
            with suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        log.close()


def _queued_run(home: str, run_id: str) -> tuple[str, str]:
    """A queued run's line (wall from its submission to its end, work, over, ratio) once it
    ended, and its phases from its events: queued until the daemon dequeued it, from then
    until it started (the run worker's start), the run."""
    from freshness_pipeline.defs.run_summary import summarize

    with _instance(home) as instance:
        deadline = time.monotonic() + 600
        while (run := instance.get_run_by_id(run_id)) is None or not run.is_finished:
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run_id} did not end in 600 s")
            time.sleep(0.2)
        first: dict[str, float] = {}
        for record in instance.get_records_for_run(run_id).records:
            event = record.event_log_entry
            if event.dagster_event is not None:
                first.setdefault(event.dagster_event.event_type_value, event.timestamp)
        record = instance.get_run_record_by_id(run_id)
        work = float(summarize(instance, run_id).get("seconds") or 0.0)
    if record is None or record.end_time is None or run.status.value != DAGSTER_SUCCESS:
        raise RuntimeError(f"run {run_id} ended {run.status}: see {home}/daemon.log")
    wall = record.end_time - first["PIPELINE_ENQUEUED"]
    line = f"{wall:>7.2f} {work:>7.2f} {wall - work:>7.2f} {wall / work:>6.2f} {'':>6}"
    phases = (
        f"phases s: queued {first['PIPELINE_STARTING'] - first['PIPELINE_ENQUEUED']:.2f}, "
        f"to its start {first['PIPELINE_START'] - first['PIPELINE_STARTING']:.2f}, "
        f"run {record.end_time - first['PIPELINE_START']:.2f}"
    )
    return line, phases


# The older code's `freshness` script: its entry point where it has one, else `main`.
_OLDER_SCRIPT = [
    sys.executable,
    "-c",
    "import sys\nfrom freshness_pipeline import cli\nsys.exit(getattr(cli, 'entry', cli.main)())",
]


def _freshness() -> list[str]:
    script = Path(sys.executable).with_name("freshness")
    return [str(script)] if script.exists() else [sys.executable, "-m", "freshness_pipeline.cli"]


def _time(cmd: list[str], env: dict[str, str], profile: Path | None) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of every process the command started, its stdout. A
    process whose parent ended without waiting for it (a run worker when its code server is
    killed) comes to this one (`_adopt_orphans`), which collects it, so its CPU counts too."""
    _adopt_orphans()
    kept = set(_children())  # the served site, multiprocessing's resource tracker
    if profile is not None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        cmd = [spy, "record", "--subprocesses", "--format", "raw", "-r", "50", "-o", str(profile), "--", *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # Run from the home: Dagster puts the working directory first on the path of the code
    # server and the run worker, and this checkout's package would shadow an older one's.
    out = subprocess.run(cmd, env=env, cwd=env["DAGSTER_HOME"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    _collect_orphans(kept)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout


def _adopt_orphans() -> None:
    """Be the parent of every orphan among this process's descendants (Linux's child
    subreaper), so that their CPU reaches `RUSAGE_CHILDREN` once they are collected."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _collect_orphans(kept: set[int]) -> None:
    """Wait for the orphans the command left (those still running are stopped: a killed
    code server's heartbeat would keep it for minutes); `kept` are this process's own.
    Until none is left: an orphan's own children come here once it ends (the run workers
    of the code server's preloaded copy, `defs/worker_fork.py`)."""
    while orphans := set(_children()) - kept:
        for pid in orphans:
            with suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _children() -> list[int]:
    """The pids whose parent is this process (none where there is no /proc)."""
    mine = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            if stat.read_text().rsplit(")", 1)[1].split()[1] == mine:
                found.append(int(stat.parent.name))
    return found


def _work(stdout: str) -> float:
    """The run's own seconds, summed over the sources of `freshness run --json`."""
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return sum(float(r.get("seconds") or 0.0) for r in rows)


def _phases(home: str, stdout: str, started: float, ended: float) -> str:
    """Where a run's wall went, from its record in the instance: until the run existed (the
    command's imports; launched, also the code server's load and `dagster job launch`), until it
    started (launched: the run worker's start and code-location load), its steps, and after
    its end (the summary; launched, the run worker's exit)."""
    run_ids = [json.loads(line)["run_id"] for line in stdout.splitlines() if line.startswith("{")]
    with _instance(home) as instance:
        record = instance.get_run_record_by_id(run_ids[-1])
    if record is None or record.start_time is None or record.end_time is None:
        return "phases: the run's record has no start or end"
    created = record.create_timestamp.timestamp()
    steps = record.end_time - record.start_time
    return (
        f"phases s: to the run {created - started:.2f}, to its start {record.start_time - created:.2f}, "
        f"run {steps:.2f}, after its end {ended - record.end_time:.2f}"
    )


@contextmanager
def _instance(home: str) -> Iterator[Any]:
    """The Dagster instance of `home` (a `dagster.DagsterInstance`; Dagster is imported only here)."""
    import dagster as dg

    before = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = home
    try:
        with dg.DagsterInstance.get() as instance:
            yield instance
    finally:
        if before is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = before


def _breakdown(raw: Path) -> str:
    """Shares of the profile's samples per BREAKDOWN category, all processes together."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        counts[_category(stack)] += int(n)
    total = sum(counts.values()) or 1
    return ", ".join(f"{k} {v / 50:.1f} s ({v / total:.0%})" for k, v in counts.most_common())


def _category(stack: str) -> str:
    for name, patterns in BREAKDOWN:
        if any(p in stack for p in patterns):
            return name
    return "other"


@contextmanager
def _site(name: str, pages: int) -> Iterator[Site]:
    if name == "demo":
        from freshness_pipeline.demo.run import SITE
        from freshness_pipeline.demo.server import DocsSite, load_folder

        with DocsSite() as docs:
            docs.publish(load_folder(SITE / "v1"))
            yield Site("demo", docs.sitemap_url, lambda: None)
        return
    if name != "generated":
        raise SystemExit(f"--sites: unknown site {name!r} (demo, generated)")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    port = _free_port()
    server = ctx.Process(target=serve, args=(SiteSpec(pages), port, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the generated site did not start")
        yield Site(f"{pages}pages", f"http://127.0.0.1:{port}/sitemap.xml", server.kill)
    finally:
        server.kill()
        server.join()


def _home(home: Path, site: Site, embedder: str) -> dict[str, str]:
    """A fresh Dagster home with the project's dagster.yaml and a one-source sources file."""
    from freshness_pipeline.defs.instance import write_instance_config

    write_instance_config(home)
    sources = home / "sources.yaml"
    settings: dict[str, Any] = {
        "sources": [{"name": site.name, "sitemap": site.sitemap}],
        "embedder": {"provider": embedder},
    }
    sources.write_text(yaml.safe_dump(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FRESHNESS_", "DAGSTER_"))}
    return env | {"DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(sources)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
