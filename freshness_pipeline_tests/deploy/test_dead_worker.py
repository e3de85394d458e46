"""The only `embeddings` worker killed outright (main process and pool child, as when its
node dies) while it runs `vector_index`, on Redis, which hands an unacknowledged task out
again only after the visibility timeout: the run cannot go on. The shipped dagster.yaml's run
monitoring (only its timings shortened here: `max_runtime_seconds` and the poll interval; the
slot's delay, `free_slots_after_run_end_seconds: 10`, is the shipped one) fails the run
within a bounded time and frees its `embeddings` pool slot. While it waits, `freshness run`
says once that vector_index's worker (its pool process) stopped heartbeating, and when its
task would come back. The next `freshness run` says its vector_index is waiting for a worker
(queue embeddings) until one starts, then converges.

The step is held mid-way by the OpenAI stand-in, which leaves the first embedding request
unanswered, so the kill lands while vector_index is running for certain.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline.defs.executors import DEFAULT_VISIBILITY_S
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.dagster_services import stop as stop_worker
from freshness_pipeline_tests.deploy.conftest import (
    check_statuses,
    deployment_env,
    dump,
    start_deployment,
    start_worker,
    wait_ready,
    write_sources,
)
from freshness_pipeline_tests.processes import descendants
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.standins.openai_standin import OpenAIStandIn

pytestmark = pytest.mark.postgres
KEY = "standin-key"
MAX_RUNTIME_S = 150  # above a whole run's time on a busy 2-core host (the next run's too)
POLL_S = 2
SLOT_S = 10  # the shipped free_slots_after_run_end_seconds
FAILED_BOUND_S = MAX_RUNTIME_S + 60  # from the kill: the runtime, a poll, the termination
WAITING = "vector_index waiting for a worker (queue embeddings)"
BEAT_S = 3  # runs.beat_s: a step 9 s without a beat lost its worker
STOPPED = re.compile(
    rf"docs: vector_index on {re.escape(socket.gethostname())} pid (\d+) stopped heartbeating \d+ s ago; its task "
    rf"comes back when Celery's visibility timeout \({DEFAULT_VISIBILITY_S} s after its delivery\) ends, in about "
    r"\d+ s, or the run's max runtime ends it$"
)


class _Run:
    """`freshness run --source docs --json`, its stdout and stderr each read as they come (by a
    thread of their own: `communicate` would take the stderr lines from under `said`)."""

    def __init__(self, env: dict[str, str]) -> None:
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--source", "docs", "--json"]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.readers = [
            threading.Thread(target=lambda lines=lines, pipe=pipe: lines.extend(iter(pipe.readline, "")))
            for lines, pipe in ((self.stdout, self.proc.stdout), (self.stderr, self.proc.stderr))
        ]
        for reader in self.readers:
            reader.start()

    def said(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(text in line for line in self.stderr):
                return True
            time.sleep(0.2)
        return any(text in line for line in self.stderr)

    def outcome(self, timeout: float) -> dict[str, object]:
        self.proc.wait(timeout)
        for reader in self.readers:
            reader.join(10)
        return json.loads(self.stdout[-1])

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # RabbitMQ hands the task out again at once
def test_a_dead_embeddings_worker_fails_its_run_in_bounded_time_and_the_next_run_converges(
    tmp_path: Path, databases: tuple[str, str], broker: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dagster_db, state_db = databases
    with ExitStack() as stack:
        openai = stack.enter_context(OpenAIStandIn(api_key=KEY, hang_s=600))
        site = stack.enter_context(DocsSite())
        site.publish(generate(3, sections_per_page=2, seed=77).markdown())
        embedder = {"provider": "openai", "base_url": openai.base_url, "timeout_s": 600}
        sources = write_sources(tmp_path / "sources.yaml", {"docs": site.sitemap_url}, tmp_path / "vectors", embedder)
        # Beats often enough that the stopped one is said well within the run's max runtime.
        sources.write_text(yaml.safe_dump(yaml.safe_load(sources.read_text()) | {"runs": {"beat_s": BEAT_S}}))
        env = deployment_env(tmp_path, dagster_db, state_db, broker, sources) | {"OPENAI_API_KEY": KEY}
        instance_yaml = Path(env["DAGSTER_HOME"]) / "dagster.yaml"
        config = yaml.safe_load(instance_yaml.read_text())
        assert config["run_monitoring"]["free_slots_after_run_end_seconds"] == SLOT_S
        config["run_monitoring"] |= {"max_runtime_seconds": MAX_RUNTIME_S, "poll_interval_seconds": POLL_S}
        instance_yaml.write_text(yaml.safe_dump(config))
        openai.faults.append(("/v1/embeddings", "hang"))  # the first embedding request never answers

        stack.callback(stop_worker, start_worker(env, "general", ("dagster",), tmp_path / "general.log"))
        wait_ready(tmp_path / "general.log", "general")  # first: it creates Dagster's tables
        embed = start_worker(env, "embed", ("embeddings",), tmp_path / "embed.log")
        stack.callback(stop_worker, embed)
        wait_ready(tmp_path / "embed.log", "embed")
        start_deployment(stack, env, tmp_path)
        for k in env:
            if k.startswith("DAGSTER_"):
                monkeypatch.setenv(k, env[k])

        first = _Run(env)
        stack.callback(first.end)
        deadline = time.monotonic() + 300
        while not any(r.path == "/v1/embeddings" for r in list(openai.requests)):
            assert first.proc.poll() is None, f"the run ended before vector_index embedded: {first.proc.communicate()}"
            assert time.monotonic() < deadline, "vector_index never called the embedder"
            time.sleep(0.2)
        pool = descendants(embed.pid)  # the worker's processes: vector_index runs in its pool child
        os.killpg(embed.pid, signal.SIGKILL)  # the worker's main process and its pool child
        embed.wait(30)
        killed_at = time.monotonic()

        outcome = first.outcome(FAILED_BOUND_S + 60)
        failed_s = time.monotonic() - killed_at
        assert outcome["status"] == "failure" and "committed" not in outcome, outcome
        assert f"Exceeded maximum runtime of {MAX_RUNTIME_S} seconds" in str(outcome["message"]), outcome
        assert "vector_index was still running in its worker when the run ended" in str(outcome["message"]), outcome
        stopped = [m for line in first.stderr if (m := STOPPED.match(line.rstrip("\n")))]
        assert len(stopped) == 1 and int(stopped[0].group(1)) in pool, (pool, first.stderr)
        with dg.DagsterInstance.get() as instance:
            run_id = str(outcome["run_id"])
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
            while run_id in instance.event_log_storage.get_concurrency_run_ids():  # its `embeddings` slot
                assert time.monotonic() - killed_at < failed_s + SLOT_S + 60, "the failed run's pool slot was kept"
                time.sleep(0.5)
            freed_s = time.monotonic() - killed_at
        # Its step's checks, which no worker will evaluate, are what Dagster resolves a planned
        # check of a failed run to.
        statuses = check_statuses(env["FRESHNESS_DAGSTER_URL"], run_id, {"vector_index": ("reconcile_clean",)})
        assert statuses == {"reconcile_clean": ("EXECUTION_FAILED", None)}, statuses

        # No worker on the `embeddings` queue: the next run says so, then goes on once one starts.
        nxt = _Run(env)
        stack.callback(nxt.end)
        assert nxt.said(WAITING, 300), nxt.stderr
        stack.callback(stop_worker, start_worker(env, "embed2", ("embeddings",), tmp_path / "embed2.log"))
        again = nxt.outcome(300)
        assert again["status"] == "success", again
        assert sum(WAITING in line for line in nxt.stderr) == 1, nxt.stderr
        assert len(dump(env)) == 3 * 2
    print(f"run failed {failed_s:.0f} s after the kill (max runtime {MAX_RUNTIME_S} s); slot freed at {freed_s:.0f} s")
    assert failed_s < FAILED_BOUND_S
