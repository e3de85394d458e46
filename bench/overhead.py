"""What Dagster costs per refresh: `python -m bench.overhead [--runs 10]`.

Serves the demo's site (five pages) on loopback, refreshes it twice in-process through the
`refresh` job (the first run indexes it, the second warms every cache), then times `--runs`
quiet refreshes, where the pipeline has almost nothing to do. Prints the seconds per run and
the steps and events of the last run: on so small a site nearly all of it is the run's
steps and the events they store in the instance's SQLite event log.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import yaml

from freshness_pipeline.demo.run import SITE
from freshness_pipeline.demo.server import DocsSite, load_folder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10, help="quiet refreshes to time")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="freshness-overhead-") as tmp, DocsSite() as site:
        home = Path(tmp)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        sources = home / "sources.yaml"
        sources.write_text(
            yaml.safe_dump(
                {"sources": [{"name": "demo", "sitemap": site.sitemap_url}], "embedder": {"provider": "hashing"}}
            )
        )
        os.environ |= {"DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(sources)}
        import dagster as dg

        from freshness_pipeline.defs.runner import run_refresh  # reads the sources file on import

        site.publish(load_folder(SITE / "v1"))
        for _ in range(2):
            assert run_refresh("demo", in_process=True)["status"] == "success"
        t0 = time.perf_counter()
        for _ in range(args.runs):
            last = run_refresh("demo", in_process=True)
        per_run = (time.perf_counter() - t0) / args.runs
        with dg.DagsterInstance.get() as instance:
            records = instance.get_records_for_run(last["run_id"], limit=10_000).records
        steps = {r.event_log_entry.step_key for r in records if r.event_log_entry.step_key}
        print(f"{args.runs} quiet refreshes: {per_run:.3f} s per run, {len(steps)} steps, {len(records)} events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
