"""What a refresh costs a user beyond its work: `python -m bench.overhead` (`make bench-overhead`).

Serves two sites on loopback, the demo's (five pages) and a generated one (`bench/site.py`,
`--pages`, 150 by default), and times each command in a fresh process, as a user, a sensor
or a script runs it: the first `freshness run`, then `--pairs` alternating pairs of a quiet
`freshness run` (nothing changed) and Dagster alone (`bench/dagster_floor.py`, a job of the
refresh job's shape whose steps do nothing, in a home of its own), then `freshness status` and
a cold `freshness search`. A quiet run's overhead beyond the floor is this project's own;
the target is at most 0.5 s on an idle machine. The summary line gives the medians of the
wall and of the CPU seconds, quiet run beside floor, and whether each difference holds to
the target (on a busy machine the wall waits for the cores; the CPU seconds do not).

`--commands submit`: `--pairs` quiet runs submitted with `freshness run --submit` to a
`dagster-webserver`, which a `dagster-daemon` dequeues and launches through its own code
server, as a deployment runs them. Each prints two lines, with no target: the submitted
run (the command's wall: the queue, the launch, the run, the read of its events) and the
launched run, from the run's record (`launched`: from its launch to its end, i.e. the run
worker's start, its load of the code location and the steps; `queued`: before it).

Each run's line shows its wall beside its own work (`seconds` of `freshness run --json`:
discovery, fetch, sections, plan, index), the overhead (wall - work) and the CPU seconds of
the command's processes. Every command runs with a bytecode cache (`PYTHONPYCACHEPREFIX` in
the bench's temporary folder), as an installed package runs from its compiled modules; the
first run of each home fills it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from .site import SiteSpec, serve

QUERY = "how to configure the request timeout"
FLOOR = "floor"  # bench/dagster_floor.py
TARGET_S = 0.5  # a quiet run's overhead beyond Dagster alone, on an idle machine
REPO = Path(__file__).resolve().parents[1]


@dataclass(slots=True)
class Site:
    name: str
    sitemap: str
    stop: Callable[[], None]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=150, help="pages of the generated site")
    p.add_argument("--pairs", type=int, default=3, help="quiet run / floor pairs per site")
    p.add_argument("--sites", default="demo,generated", help="comma-separated: demo, generated")
    p.add_argument("--embedder", default="hashing", choices=("hashing", "local"))
    p.add_argument("--commands", default="run,status,search", help="comma-separated: run, status, search, submit")
    args = p.parse_args(argv)
    print(f"uptime: {_uptime()}", flush=True)
    print(f"{'site':<10} {'command':<30} {'wall s':>7} {'work s':>7} {'over s':>7} {'cpu s':>6}  load", flush=True)
    for name in args.sites.split(","):
        with _site(name, args.pages) as site, tempfile.TemporaryDirectory(prefix="freshness-overhead-") as tmp:
            env = _home(Path(tmp), "home", site, args.embedder)
            floor = _home(Path(tmp), FLOOR, site, args.embedder)
            _bench_site(site, env, floor, args)
    print(f"uptime: {_uptime()}", flush=True)
    return 0


def _bench_site(site: Site, env: dict[str, str], floor: dict[str, str], args: argparse.Namespace) -> None:
    commands = args.commands.split(",")
    _line(site, "first run", ["run", "--json"], env)
    if "run" in commands:
        _line(site, "Dagster alone, first run", [FLOOR], floor)
        quiet, alone = [], []
        for _ in range(args.pairs):
            quiet.append(_line(site, "quiet run", ["run", "--json"], env))
            alone.append(_line(site, "Dagster alone (floor)", [FLOOR], floor))
        _summary(site, quiet, alone)
    if "status" in commands:
        _line(site, "status", ["status"], env)
    if "search" in commands:
        _line(site, "search (cold)", ["search", QUERY], env)
    if "submit" in commands:
        with _deployment(env) as url:
            for _ in range(args.pairs):
                run = _line(site, "quiet run, submitted", ["run", "--json", "--submit", url], env)
                _launched(site, Path(env["DAGSTER_HOME"]), run.run_ids)


@dataclass(frozen=True, slots=True)
class Run:
    wall: float
    work: float
    cpu: float
    run_ids: list[str]


def _summary(site: Site, quiet: list[Run], alone: list[Run]) -> None:
    """The medians, quiet run beside floor: wall and CPU, each against the target."""

    def median(runs: list[Run], field: str) -> float:
        return statistics.median(getattr(r, field) for r in runs)

    wall, cpu = median(quiet, "wall") - median(alone, "wall"), median(quiet, "cpu") - median(alone, "cpu")
    work = statistics.median(r.wall - r.work for r in quiet) - median(alone, "wall")

    def verdict(over: float) -> str:
        return "within" if over <= TARGET_S else "above"

    print(
        f"{site.name:<10} quiet run {median(quiet, 'wall'):.2f} s wall, {median(quiet, 'cpu'):.2f} s CPU; "
        f"Dagster alone {median(alone, 'wall'):.2f} s, {median(alone, 'cpu'):.2f} s (medians of {len(quiet)}): "
        f"wall {wall:+.2f} s ({work:+.2f} s without the work), {verdict(wall)} floor + {TARGET_S} s; "
        f"CPU {cpu:+.2f} s, {verdict(cpu)} (load {os.getloadavg()[0]:.1f})",
        flush=True,
    )


def _line(site: Site, label: str, cmd: list[str], env: dict[str, str]) -> Run:
    """Run one command, print its line."""
    if cmd == [FLOOR]:
        full = [sys.executable, "-m", "bench.dagster_floor"]
    else:
        full = [str(Path(sys.executable).with_name("freshness")), *cmd]
    wall, cpu, stdout = _time(full, env)
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    work = sum(float(r.get("seconds") or 0.0) for r in rows) if cmd[0] in ("run", FLOOR) else None
    over = f"{wall - work:>7.2f}" if work is not None else f"{'':>7}"
    print(f"{site.name:<10} {label:<30} {wall:>7.2f} {work or 0.0:>7.2f} {over} {cpu:>6.2f}  {os.getloadavg()[0]:.1f}")
    return Run(wall, work or 0.0, cpu, [str(r["run_id"]) for r in rows if r.get("run_id")])


def _launched(site: Site, home: Path, run_ids: list[str]) -> None:
    """A submitted run's launch, from its record: queued until the daemon launched it, then
    launched until it ended (the run worker's start, its load of the location, the steps)."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run_id in run_ids:
            record = instance.get_run_record_by_id(run_id)
            starting = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_STARTING)
            if record is None or record.end_time is None or not starting:
                raise RuntimeError(f"run {run_id} has no launch and end in {home}")
            launched, end = starting[0].timestamp, record.end_time
            queued = launched - record.create_timestamp.timestamp()
            label = f"  launched (queued {queued:.2f} s)"
            print(f"{site.name:<10} {label:<30} {end - launched:>7.2f}", flush=True)


def _time(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the command's processes, its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=env["DAGSTER_HOME"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout


@contextmanager
def _deployment(env: dict[str, str]) -> Iterator[str]:
    """`dagster-webserver` and `dagster-daemon` on the repo's workspace and the home's
    instance, each in a process group of its own; the webserver's URL once it answers."""
    port = _free_port()
    home = Path(env["DAGSTER_HOME"])
    bin_dir = Path(sys.executable).parent
    workspace = str(REPO / "workspace.yaml")
    commands = {
        "webserver": [str(bin_dir / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), "-w", workspace],
        "daemon": [str(bin_dir / "dagster-daemon"), "run", "-w", workspace],
    }
    procs = []
    try:
        for name, cmd in commands.items():
            log = (home / f"{name}.log").open("w")
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=log, start_new_session=True))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with suppress(httpx.HTTPError):
                if httpx.get(f"{url}/server_info", timeout=5).status_code == 200:
                    break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"dagster-webserver did not answer: {(home / 'webserver.log').read_text()[-2000:]}")
        yield url
    finally:
        for proc in procs:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)


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


def _home(tmp: Path, name: str, site: Site, embedder: str) -> dict[str, str]:
    """A fresh Dagster home `tmp/name` with the project's dagster.yaml and a one-source
    sources file; the environment of its commands, with a bytecode cache in `tmp`."""
    from freshness_pipeline.defs.instance import write_instance_config

    home = tmp / name
    write_instance_config(home)
    sources = home / "sources.yaml"
    settings: dict[str, Any] = {
        "sources": [{"name": site.name, "sitemap": site.sitemap}],
        "embedder": {"provider": embedder},
    }
    sources.write_text(yaml.safe_dump(settings))
    drop = ("FRESHNESS_", "DAGSTER_", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    pycache = str(tmp / "pycache")
    return env | {
        "DAGSTER_HOME": str(home),
        "FRESHNESS_SOURCES": str(sources),
        "PYTHONPATH": str(REPO),
        "PYTHONPYCACHEPREFIX": pycache,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
