"""What the fetch window buys: `python -m bench.in_flight [--pages 2000] [--delays 0,0.02]`.

Serves the generated site (`bench/site.py`) once per delay (each page's answer waits that
long: 0 is loopback, 0.02 a server 20 ms away), crawls it once for its ETags, then times
`--repeats` alternated quiet crawls (every page a 304) with the `Fetcher`: its window as
the run sizes it (`core/in_flight.py`), and held at `fetch.concurrency` (8) by a CPU clock
that always reads idle, as every request was in flight before the window. On loopback
it also times plain `httpx.Client`, one request after another, the floor of any recrawl.
Prints the medians: wall seconds, pages per second and the process's CPU seconds.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from freshness_pipeline.adapters.fetch import Fetcher, Target
from freshness_pipeline.config import Source
from freshness_pipeline.core.urls import normalize_url

from .overhead import _free_port
from .site import SiteSpec, path_of, serve

Crawl = Callable[[list[Target]], None]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.in_flight", description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--delays", default="0,0.02", help="comma-separated seconds each answer waits")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    print(f"{'server':<14} {'fetcher':<30} {'wall s':>7} {'pages/s':>8} {'cpu s':>6}", flush=True)
    for delay in (float(d) for d in args.delays.split(",")):
        with _served(SiteSpec(args.pages, delay_s=delay)) as base:
            source = Source(name="bench", sitemap=f"{base}/sitemap.xml")
            urls = [f"{base}{path_of(i)}" for i in range(args.pages)]
            with Fetcher(source) as f:
                first = list(f.fetch([Target(normalize_url(u), u) for u in urls]))
            targets = [Target(r.url, r.url, r.etag, r.last_modified, r.body_sha256) for r in first]
            crawls = {
                "window (the default)": _fetcher(source, time.process_time),
                "window held at concurrency": _fetcher(source, lambda: 0.0),
            }
            if delay == 0:
                crawls["plain httpx, one at a time"] = _plain
            server = "loopback" if delay == 0 else f"{delay * 1000:g} ms away"
            timed: dict[str, list[tuple[float, float]]] = {name: [] for name in crawls}
            for _ in range(args.repeats):
                for name, crawl in crawls.items():
                    wall, cpu = time.perf_counter(), time.process_time()
                    crawl(targets)
                    timed[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            for name, runs in timed.items():
                wall_s = statistics.median(w for w, _ in runs)
                cpu_s = statistics.median(c for _, c in runs)
                print(f"{server:<14} {name:<30} {wall_s:>7.2f} {len(targets) / wall_s:>8.0f} {cpu_s:>6.2f}", flush=True)
    return 0


def _fetcher(source: Source, cpu: Callable[[], float]) -> Crawl:
    def crawl(targets: list[Target]) -> None:
        with Fetcher(source, cpu=cpu) as f:
            for _ in f.fetch(targets):
                pass

    return crawl


def _plain(targets: list[Target]) -> None:
    with httpx.Client() as client:
        for t in targets:
            client.get(t.fetch_url, headers={"If-None-Match": t.etag or ""})


@contextmanager
def _served(spec: SiteSpec) -> Iterator[str]:
    ctx = multiprocessing.get_context("spawn")
    ready, port = ctx.Event(), _free_port()
    server = ctx.Process(target=serve, args=(spec, port, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the generated site did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.join()


if __name__ == "__main__":
    raise SystemExit(main())
