"""First-run upserts into the embedded LanceDB store: `python -m bench.upserts [--records N]`.

Writes N records (384-d, 10,000 per call, as `pipeline/indexing.py` does) into a new
namespace twice, each in a fresh process so its peak RSS is its own:

  append  the store found the namespace empty, so each call is an append
  merge   another writer touched the table first, so each call is a `merge_insert`
          (what every call was before the append path)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BATCH = 10_000
DIM = 384


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.upserts", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=600_000)
    p.add_argument("--mode", choices=["append", "merge"], help=argparse.SUPPRESS)  # internal: one run
    args = p.parse_args(argv)
    if args.mode:
        print(json.dumps(_run(args.mode, args.records)))
        return 0
    print(f"{args.records} records of {DIM} dimensions, {BATCH} per call")
    print(f"{'mode':<8} {'wall s':>8} {'records/s':>10} {'peak MiB':>9}")
    for mode in ("append", "merge"):
        cmd = [sys.executable, "-m", "bench.upserts", "--records", str(args.records), "--mode", mode]
        r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
        print(f"{mode:<8} {r['wall_s']:>8.1f} {args.records / r['wall_s']:>10.0f} {r['peak_mib']:>9.0f}", flush=True)
    return 0


def _run(mode: str, n: int) -> dict[str, float]:
    from freshness_pipeline.adapters.vectorstores.base import VectorRecord
    from freshness_pipeline.adapters.vectorstores.lancedb_store import LanceDBStore

    path = Path(tempfile.mkdtemp(prefix="freshness-upserts-"))
    rng = np.random.default_rng(0)

    def records(start: int, count: int) -> list[VectorRecord]:
        vectors = rng.standard_normal((count, DIM)).astype(np.float32)
        return [
            VectorRecord(
                f"https://docs.example/page-{i // 8}#section-{i % 8}:0",
                vectors[j],
                {"url": f"https://docs.example/page-{i // 8}", "content_hash": f"{i:064x}", "text": "lorem " * 60},
            )
            for j, i in enumerate(range(start, start + count))
        ]

    if mode == "merge":
        LanceDBStore(path).upsert("bench", records(n, 1))  # the table is not empty for the store below
    store = LanceDBStore(path)
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        store.upsert("bench", records(start, min(BATCH, n - start)))
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


if __name__ == "__main__":
    raise SystemExit(main())
