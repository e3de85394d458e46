"""A Celery worker killed while it runs `vector_index` (the whole worker: its main process and
its pool child, as when a node dies) does not hang the run: the step's task, acknowledged
only when it ends, goes back to the broker, the other worker runs it, the run succeeds and
releases the `embeddings` pool slot, and the next run converges. On Redis and on RabbitMQ.
The run's events say, once, why vector_index started a second time: it restarted on the
other worker, its previous worker (the killed pool process) gone.

The step is held mid-way by the OpenAI stand-in, which leaves the first embedding request
unanswered, so the kill lands while vector_index is running for certain.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.dagster_services import stop as stop_worker
from freshness_pipeline_tests.deploy.conftest import (
    deployment_env,
    dump,
    start_deployment,
    start_worker,
    wait_ready,
    workers_by_step,
    write_sources,
)
from freshness_pipeline_tests.processes import descendants
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.standins.openai_standin import OpenAIStandIn

pytestmark = pytest.mark.postgres
KEY = "standin-key"
VISIBILITY_S = 15  # Redis: a dead worker's task is handed out again after this long
RECOVERY_S = 180  # from the kill to the run's end, with the machine's load
RESTART = re.compile(r"vector_index restarted \(start 2\) on (\S+ pid \d+): its previous worker (\S+ pid \d+) ")


def _run(env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--source", "docs", "--json"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str], timeout: float, what: str) -> dict[str, object]:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"{what}: the run did not end within {timeout:.0f} s:\n{stdout}\n{stderr[-3000:]}")
    assert proc.returncode == 0, f"{what}: {stdout}\n{stderr[-3000:]}"
    return json.loads(stdout.splitlines()[-1])


def test_a_worker_killed_mid_step_hands_the_step_to_the_other(
    tmp_path: Path, databases: tuple[str, str], broker: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dagster_db, state_db = databases
    with ExitStack() as stack:
        openai = stack.enter_context(OpenAIStandIn(api_key=KEY, hang_s=600))
        site = stack.enter_context(DocsSite())
        site.publish(generate(3, sections_per_page=2, seed=71).markdown())
        embedder = {"provider": "openai", "base_url": openai.base_url, "timeout_s": 600}
        sources = write_sources(tmp_path / "sources.yaml", {"docs": site.sitemap_url}, tmp_path / "vectors", embedder)
        env = deployment_env(tmp_path, dagster_db, state_db, broker, sources)
        env |= {"OPENAI_API_KEY": KEY, "FRESHNESS_CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_S)}
        openai.faults.append(("/v1/embeddings", "hang"))  # the first embedding request never answers

        # Two workers on both queues: either may take vector_index, the other takes it over.
        names = ("one", "two")
        workers = {}
        for n in names:  # one after the other: the first creates Dagster's tables
            workers[n] = start_worker(env, n, ("dagster", "embeddings"), tmp_path / f"{n}.log")
            stack.callback(stop_worker, workers[n])
            wait_ready(tmp_path / f"{n}.log", n)
        start_deployment(stack, env, tmp_path)

        run = _run(env)
        stack.callback(_end, run)
        deadline = time.monotonic() + 300
        while not any(r.path == "/v1/embeddings" for r in list(openai.requests)):
            assert run.poll() is None, f"the run ended before vector_index embedded: {run.communicate()}"
            assert time.monotonic() < deadline, "vector_index never called the embedder"
            time.sleep(0.2)

        for k in env:
            if k.startswith("DAGSTER_"):
                monkeypatch.setenv(k, env[k])
        with dg.DagsterInstance.get() as instance:
            (record,) = instance.get_run_records()
            run_id = record.dagster_run.run_id
            victim = workers_by_step(instance, run_id)["vector_index"].split("@")[0]
            pool = descendants(workers[victim].pid)  # the worker's processes: vector_index runs in its pool child
            _kill(workers[victim])
            killed_at = time.monotonic()
            outcome = _finish(run, RECOVERY_S, f"worker {victim} killed mid vector_index")
            recovery_s = time.monotonic() - killed_at
            assert outcome["status"] == "success" and outcome["run_id"] == run_id, outcome
            survivor = workers_by_step(instance, run_id)["vector_index"].split("@")[0]
            assert survivor != victim, (survivor, victim)
            ((restarted_on, previous),) = _restart_notes(instance, run_id)
            host, pid = previous.rsplit(" pid ", 1)
            assert host == socket.gethostname() and int(pid) in pool and restarted_on != previous, (pool, previous)
            # The pool slot went with the run: the next run's vector_index gets it.
            assert _finish(_run(env), RECOVERY_S, "the next run")["status"] == "success"
        index = dump(env)
    assert len(index) == 3 * 2, index
    assert recovery_s < RECOVERY_S


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def _restart_notes(instance: dg.DagsterInstance, run_id: str) -> list[tuple[str, str]]:
    """The run's warnings that vector_index restarted: (the worker it restarted on, the previous one)."""
    entries = [r.event_log_entry for r in instance.get_records_for_run(run_id).records]
    warned = [e.user_message for e in entries if e.level == logging.WARNING]
    return [(m.group(1), m.group(2)) for w in warned if (m := RESTART.match(w))]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
