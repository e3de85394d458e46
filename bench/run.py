"""The 10,000-page benchmark: `python -m bench.run [--pages 10000] [--home DIR] [--profile]
[--scenarios first,quiet_etag] [--port N] [--embedder local]`.

Four refreshes of one generated docs site through the real pipeline (`Index.refresh`:
Dagster, SQLite, LanceDB, the hashing embedder or, with `--embedder local`, the shipped
local model), each in a fresh client process so its
peak memory is its own, against a server in yet another process. Each refresh runs the
`refresh` job in the client process, as `freshness run` does:

  first        the first full run
  quiet_etag   nothing changed, the server honours ETags (304s)
  quiet_noise  nothing changed, no ETags, every answer carries a new date and build stamp
  churn        1% of pages edited (no ETags, noise on): embeds must equal the edited sections

Prints wall time, pages/s, CPU use (cores busy on average), peak RSS (the run process and
its pool workers, sampled from /proc; Linux only) and the embed count of each scenario.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .site import SiteSpec, changed_sections, serve

SOURCE = "bench"
SCENARIOS: dict[str, SiteSpec] = {
    "first": SiteSpec(0),
    "quiet_etag": SiteSpec(0),
    "quiet_noise": SiteSpec(0, etags=False, noise=True),
    "churn": SiteSpec(0, version=1, etags=False, noise=True),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=10_000)
    p.add_argument("--home", help="state folder (default: a new temporary one)")
    p.add_argument("--profile", action="store_true", help="write a cProfile per scenario into the home")
    p.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated, in this order (default: all); later ones need the state `first` left in --home",
    )
    p.add_argument("--port", type=int, help="the site's port (default: a free one); keep it to reuse a --home")
    p.add_argument("--embedder", default="hashing", choices=("hashing", "local"), help="the embedder of the run")
    p.add_argument("--client", help=argparse.SUPPRESS)  # internal: run one scenario in this process
    args = p.parse_args(argv)
    if args.client:
        print(json.dumps(_client(args.client, Path(args.home), args.port, args.profile)))
        return 0
    chosen = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    if unknown := [n for n in chosen if n not in SCENARIOS]:
        p.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    home = Path(args.home or tempfile.mkdtemp(prefix="freshness-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    port = args.port or _free_port()
    # The project's instance settings: without them Dagster queues the run for a daemon.
    from freshness_pipeline.defs.instance import write_instance_config

    write_instance_config(home)
    (home / "sources.yaml").write_text(
        json.dumps(
            {
                "sources": [{"name": SOURCE, "sitemap": f"http://127.0.0.1:{port}/sitemap.xml"}],
                "embedder": {"provider": args.embedder},
            }
        )
    )
    mode = f"{args.embedder} embedder"
    print(f"{args.pages} pages, home {home}, {os.cpu_count()} cores, {mode}; {_calibration()}")
    print(
        f"{'scenario':<12} {'wall s':>8} {'pages/s':>8} {'cpu':>5} {'peak MiB':>9} {'embedded':>9} {'load':>5}  notes",
        flush=True,
    )
    failed = False
    for name in chosen:
        spec = SCENARIOS[name]
        spec = SiteSpec(args.pages, spec.version, spec.etags, spec.noise)
        r = _scenario(name, spec, home, port, args.profile)
        notes = f"crawled {r['crawled']}, changed {r['changed']}, status {r['status']}"
        if name == "churn":
            truth = changed_sections(args.pages, 0, 1)
            notes += f", truth {truth} changed sections"
            failed |= r["embedded"] != truth
        elif name != "first":
            failed |= r["embedded"] != 0
        failed |= r["status"] != "success"
        print(
            f"{name:<12} {r['wall_s']:>8.1f} {args.pages / r['wall_s']:>8.0f} {r['cpu_s'] / r['wall_s']:>5.2f} "
            f"{r['peak_rss_mib']:>9.0f} {r['embedded']:>9} {os.getloadavg()[0]:>5.1f}  {notes}",
            flush=True,
        )
        if r["steps"]:
            steps = ", ".join(f"{k} {s:.1f} s {m:.0f} MiB" for k, (s, m) in r["steps"].items())
            print(f"{'':<12} steps: {steps}", flush=True)
    return 1 if failed else 0


def _scenario(name: str, spec: SiteSpec, home: Path, port: int, profile: bool) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(target=serve, args=(spec, port, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the bench site did not start")
        cmd = [sys.executable, "-m", "bench.run", "--client", name, "--home", str(home), "--port", str(port)]
        cmd += ["--profile"] if profile else []
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"scenario {name} failed:\n{out.stderr[-4000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.kill()
        server.join()


def _client(name: str, home: Path, port: int, profile: bool) -> dict[str, Any]:
    """One refresh from this process; what it cost, measured from just before the run."""
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["FRESHNESS_SOURCES"] = str(home / "sources.yaml")
    from freshness_pipeline import open_index

    index = open_index(home, home / "sources.yaml")
    sampler = _PeakRss()
    sampler.start()
    cpu0, t0 = os.times(), time.perf_counter()
    if profile:
        import cProfile

        with cProfile.Profile() as prof:
            result = index.refresh(SOURCE)
        prof.dump_stats(str(home / f"{name}.prof"))
    else:
        result = index.refresh(SOURCE)
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    sampler.stop()
    # Pool workers are joined when their pool closes, so the children's times include them.
    cpu = sum(cpu1[:4]) - sum(cpu0[:4])
    return {
        "scenario": name,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mib": sampler.peak / 2**20,
        "steps": _steps(result.get("run_id"), sampler.samples),
        **{k: result.get(k, 0) for k in ("status", "crawled", "new", "changed", "embedded", "deleted")},
        "message": result.get("message", ""),
    }


def _calibration() -> str:
    """How fast this machine runs plain Python today: figures of two days compare only
    scaled by it (hosts of the same kind differ by up to 2.5 times; docs/benchmarks.md)."""
    t0 = time.perf_counter()
    total = 0
    for i in range(20_000_000):
        total += i
    return f"a 20,000,000-step Python loop takes {time.perf_counter() - t0:.2f} s"


def _steps(run_id: str | None, samples: list[tuple[float, int]]) -> dict[str, tuple[float, float]]:
    """Each step of the run: its seconds and the peak RSS (MiB) sampled while it ran, from
    the step start and end events of the run's event log."""
    import dagster as dg

    if run_id is None:
        return {}
    ends = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
    start: dict[str, float] = {}
    out: dict[str, tuple[float, float]] = {}
    for e in dg.DagsterInstance.get().all_logs(run_id):
        if e.dagster_event is None or e.step_key is None:
            continue
        if e.dagster_event.event_type == dg.DagsterEventType.STEP_START:
            start[e.step_key] = e.timestamp
        elif e.dagster_event.event_type in ends and e.step_key in start:
            t0, t1 = start[e.step_key], e.timestamp
            peak = max((rss for t, rss in samples if t0 <= t <= t1), default=0)
            out[e.step_key] = (t1 - t0, peak / 2**20)
    return out


class _PeakRss(threading.Thread):
    """Samples the RSS of this process plus all its descendants every 50 ms (each sample
    kept with its time, for the peak of each step)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int]] = []
        self._done = threading.Event()

    @property
    def peak(self) -> int:
        return max((rss for _, rss in self.samples), default=0)

    def run(self) -> None:
        while not self._done.wait(0.05):
            self._sample()

    def stop(self) -> None:
        self._done.set()
        self.join()
        self._sample()

    def _sample(self) -> None:
        self.samples.append((time.time(), sum(_rss(p) for p in _tree(os.getpid()))))


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return out


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    raise SystemExit(main())
