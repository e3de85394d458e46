"""A run SIGKILLed inside `vector_index` (its run worker is the `freshness run` process) stays
STARTED holding its `embeddings` pool slot. Under a real `dagster-daemon` with the shipped
dagster.yaml's run monitoring (only its timings shortened here: `max_runtime_seconds`, the poll
interval, the slot delay), the run is failed within a bounded time, its slot is freed, and the
next `freshness run`, started meanwhile, waits for it, then converges."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import yaml

from freshness_pipeline.cli import main
from freshness_pipeline.defs.instance import INSTANCE_CONFIG
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.indexing import CRASH_ENV
from freshness_pipeline_tests.dagster_services import daemon
from freshness_pipeline_tests.defs.harness import write_sources
from freshness_pipeline_tests.sitegen import generate

REPO = Path(__file__).resolve().parents[2]
MAX_RUNTIME_S = 20
POLL_S = 2
# The bound: the run's max runtime, then a monitoring poll and the slot's delay, and the
# daemon's start on a busy 2-core host.
BOUND_S = MAX_RUNTIME_S + 90


def freshness(env: dict[str, str], *args: str, crash: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in env.items() if k != CRASH_ENV} | ({CRASH_ENV: crash} if crash else {})
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_killed_run_is_failed_by_run_monitoring_and_the_next_run_converges(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = json.loads(json.dumps(INSTANCE_CONFIG))  # the shipped dagster.yaml (a test holds them equal)
    config["run_monitoring"] |= {
        "max_runtime_seconds": MAX_RUNTIME_S,
        "poll_interval_seconds": POLL_S,
        "free_slots_after_run_end_seconds": POLL_S,
    }
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    pages = generate(5, sections_per_page=2, seed=21)
    with DocsSite() as site:
        site.publish(pages.markdown())
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        monkeypatch.setenv("FRESHNESS_SOURCES", str(sources))
        env = {**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(sources)}

        dead = freshness(env, "run", crash="upsert")
        dead.communicate(timeout=300)
        assert dead.returncode == -9  # SIGKILLed inside vector_index, before its commit
        with dg.DagsterInstance.get() as instance:
            (record,) = instance.get_run_records()
            dead_id = record.dagster_run.run_id
            assert record.dagster_run.status == dg.DagsterRunStatus.STARTED
            assert dead_id in instance.event_log_storage.get_concurrency_run_ids()  # its `embeddings` slot

        # The daemon runs until the dead run is failed and its slot freed, within the bound,
        # then stops: the next run's own length, on a busy host, is no part of the bound (under
        # the daemon it would be failed at the same shortened max runtime).
        # The next run is started first and seen waiting for the dead one; then the daemon.
        waited = tmp_path / "next.err"
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--json"]
        nxt = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=waited.open("w"), text=True)
        try:
            deadline = time.monotonic() + 300
            while f"waiting for run {dead_id} (STARTED)" not in waited.read_text():
                assert nxt.poll() is None and time.monotonic() < deadline, waited.read_text()[-3000:]
                time.sleep(0.5)
            started = time.monotonic()
            with daemon(env, tmp_path / "daemon.log"), dg.DagsterInstance.get() as instance:
                while not _freed(instance, dead_id) and time.monotonic() - started < BOUND_S + 120:
                    time.sleep(POLL_S)
                log = (tmp_path / "daemon.log").read_text()[-3000:]
                failed = instance.get_run_record_by_id(dead_id)
                assert failed is not None and failed.dagster_run.status == dg.DagsterRunStatus.FAILURE, log
                assert failed.end_time is not None
                assert _freed(instance, dead_id), "run monitoring did not fail the dead run within its bound"
            out, _ = nxt.communicate(timeout=600)  # the daemon stopped; the next run goes on
            err = waited.read_text()
        finally:
            if nxt.poll() is None:  # a failed assert above
                nxt.kill()
                nxt.wait()
        assert nxt.returncode == 0, out + err[-3000:] + log
        with dg.DagsterInstance.get() as instance:
            assert instance.event_log_storage.get_concurrency_run_ids() == set()
        assert f"waiting for run {dead_id} (STARTED)" in err, err[-3000:]
        assert json.loads(out.splitlines()[-1])["status"] == "success", out

        # What it left: the whole site indexed, and the manifest agrees with the store.
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            assert main(["--sources", str(sources), "dump"]) == 0
            assert main(["--sources", str(sources), "reconcile"]) == 0, text.getvalue()
        dumped = [json.loads(line) for line in text.getvalue().splitlines() if line.startswith("{")]
        assert {(r["url"], r["heading_path"], r["text"]) for r in dumped} == pages.expected(site.base_url)


def _freed(instance: dg.DagsterInstance, run_id: str) -> bool:
    """The run is failed and its `embeddings` slot free."""
    record = instance.get_run_record_by_id(run_id)
    ended = record is not None and record.dagster_run.status == dg.DagsterRunStatus.FAILURE
    return ended and run_id not in instance.event_log_storage.get_concurrency_run_ids()
