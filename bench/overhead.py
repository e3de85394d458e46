"""What a refresh costs a user beyond its work: `python -m bench.overhead` (`make bench-overhead`).

Serves two sites on loopback, the demo's (five pages) and a generated one (`bench/site.py`,
`--pages`, 150 by default), and times each command in a fresh process, as a user, a sensor
or a script runs it: the first `freshness run`, then `--pairs` alternating pairs of a quiet
`freshness run` (nothing changed) and Dagster alone (`bench/dagster_floor.py`, a job of the
refresh job's shape whose steps do nothing, in a home of its own), then `freshness status` and
a cold `freshness search`. A quiet run's overhead beyond the floor is this project's own;
the target is at most 0.5 s on an idle machine (the summary line says whether it holds).

`--commands submit`: `--pairs` quiet runs submitted with `freshness run --submit` to a
`dagster-webserver`, which a `dagster-daemon` dequeues and launches through its own code
server, as a deployment runs them (the wall includes the queue, the run worker's start and
its load of the code location). Reported with no target.

Each run's line shows its wall beside its own work (`seconds` of `freshness run --json`:
discovery, fetch, sections, plan, index), the overhead (wall - work) and the CPU seconds of
the command's processes.
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
            env = _home(Path(tmp) / "home", site, args.embedder)
            floor = _home(Path(tmp) / FLOOR, site, args.embedder)
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
        q, f = statistics.median(w for w, _ in quiet), statistics.median(w for w, _ in alone)
        over = statistics.median(w - work for w, work in quiet)
        verdict = "within" if q - f <= TARGET_S else "above"
        print(
            f"{site.name:<10} quiet run {q:.2f} s (median of {len(quiet)}; its overhead {over:.2f} s), "
            f"Dagster alone {f:.2f} s: {q - f:+.2f} s ({over - f:+.2f} s without the work), {verdict} the "
            f"target of floor + {TARGET_S} s (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
    if "status" in commands:
        _line(site, "status", ["status"], env)
    if "search" in commands:
        _line(site, "search (cold)", ["search", QUERY], env)
    if "submit" in commands:
        with _deployment(env) as url:
            for _ in range(args.pairs):
                _line(site, "quiet run, submitted", ["run", "--json", "--submit", url], env)


def _line(site: Site, label: str, cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run one command, print its line; its wall and work seconds."""
    if cmd == [FLOOR]:
        full = [sys.executable, str(Path(__file__).with_name("dagster_floor.py"))]
    else:
        full = [str(Path(sys.executable).with_name("freshness")), *cmd]
    wall, cpu, stdout = _time(full, env)
    work = _work(stdout) if cmd[0] in ("run", FLOOR) else None
    over = f"{wall - work:>7.2f}" if work is not None else f"{'':>7}"
    print(f"{site.name:<10} {label:<30} {wall:>7.2f} {work or 0.0:>7.2f} {over} {cpu:>6.2f}  {os.getloadavg()[0]:.1f}")
    return wall, work or 0.0


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


def _work(stdout: str) -> float:
    """The run's own seconds, summed over the sources of `freshness run --json`."""
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return sum(float(r.get("seconds") or 0.0) for r in rows)


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
    return env | {"DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(sources), "PYTHONPATH": str(REPO)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
