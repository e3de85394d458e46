"""Where a process pool starts to pay for extraction: `python -m bench.pool [--pages 64,256,512,1000]`.

Extracts N bench pages (`bench/site.py`, what `bench.run` serves) in this process and
through `pipeline.workers.parallel_map` with the pool forced on, and prints both wall
times. The pool's cost is its start: two spawned interpreters importing the extraction
modules. `workers.POOL_MIN_ITEMS` is set from these figures.
"""

from __future__ import annotations

import argparse
import time

from freshness_pipeline.pipeline import workers
from freshness_pipeline.pipeline.workers import ExtractJob, extract_one

from .site import render


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pool", description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", default="64,256,512,1000", help="comma-separated page counts")
    args = p.parse_args(argv)
    counts = [int(n) for n in args.pages.split(",")]
    jobs = [ExtractJob(f"http://127.0.0.1/p/{i}", render(i, max(counts), 1), ()) for i in range(max(counts))]
    workers.POOL_MIN_ITEMS = 1  # every count through the pool
    print(f"{'pages':>6} {'inline s':>9} {'pool s':>7}")
    for n in counts:
        t0 = time.perf_counter()
        list(map(extract_one, jobs[:n]))
        inline = time.perf_counter() - t0
        t0 = time.perf_counter()
        list(workers.parallel_map(extract_one, jobs[:n]))
        print(f"{n:>6} {inline:>9.2f} {time.perf_counter() - t0:>7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
