"""A run terminated (as the UI's Terminate does, through the webserver's GraphQL API) while
its `vector_index` is in a Celery worker: the step goes on in the worker, and the run is
CANCELED at once (Redis) or once the step ended (RabbitMQ). The step checks its run before
its commit and does not commit; `freshness run` says nothing was indexed, and that the step
was still running or why it did not commit; the step's failure and its check say why; the
index stays as the last commit left it; the next run converges. On Redis and on RabbitMQ.

The step is held mid-way by the OpenAI stand-in, which leaves the first embedding request
unanswered for `HANG_S` (the embedder then asks again), so the terminate lands while
vector_index is running for certain, and the step reaches its commit after the run ended.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg
import pytest
from dagster_graphql import DagsterGraphQLClient

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
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.standins.openai_standin import OpenAIStandIn

pytestmark = pytest.mark.postgres
KEY = "standin-key"
HANG_S = 45  # the first embedding request's wait: the terminate lands meanwhile
REFUSED = r"run {} is CANCEL(ING|ED): vector_index did not commit"
STEP_END_S = HANG_S + 240  # from the terminate to the step's end in its worker, with the machine's load


def _run(env: dict[str, str]) -> dict[str, object]:
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--source", "docs", "--json"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.splitlines()[-1])


def test_a_run_terminated_mid_index_commits_nothing_and_says_so(
    tmp_path: Path, databases: tuple[str, str], broker: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dagster_db, state_db = databases
    with ExitStack() as stack:
        openai = stack.enter_context(OpenAIStandIn(api_key=KEY, hang_s=HANG_S))
        site = stack.enter_context(DocsSite())
        site.publish(generate(3, sections_per_page=2, seed=73).markdown())
        embedder = {"provider": "openai", "base_url": openai.base_url, "timeout_s": 600}
        sources = write_sources(tmp_path / "sources.yaml", {"docs": site.sitemap_url}, tmp_path / "vectors", embedder)
        env = deployment_env(tmp_path, dagster_db, state_db, broker, sources) | {"OPENAI_API_KEY": KEY}
        for n, q in {"general": "dagster", "embed": "embeddings"}.items():  # the first creates Dagster's tables
            stack.callback(stop_worker, start_worker(env, n, (q,), tmp_path / f"{n}.log"))
            wait_ready(tmp_path / f"{n}.log", n)
        start_deployment(stack, env, tmp_path)
        url = urlsplit(env["FRESHNESS_DAGSTER_URL"])
        for k in env:
            if k.startswith("DAGSTER_"):
                monkeypatch.setenv(k, env[k])

        first = _run(env)
        assert first["status"] == "success", first
        before = dump(env)
        assert len(before) == 3 * 2

        # The site changes; the next run's first embedding request is held.
        site.publish(generate(4, sections_per_page=2, seed=74).markdown())
        asked = sum(r.path == "/v1/embeddings" for r in list(openai.requests))
        openai.faults.append(("/v1/embeddings", "hang"))
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--source", "docs", "--json"]
        run = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stack.callback(lambda: run.poll() is None and run.kill())
        deadline = time.monotonic() + 300
        while sum(r.path == "/v1/embeddings" for r in list(openai.requests)) == asked:
            assert run.poll() is None, f"the run ended before vector_index embedded: {run.communicate()}"
            assert time.monotonic() < deadline, "vector_index never called the embedder"
            time.sleep(0.2)
        with dg.DagsterInstance.get() as instance:
            (record,) = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
            run_id = record.dagster_run.run_id
            DagsterGraphQLClient(url.hostname or "", port_number=url.port).terminate_run(run_id)
            stdout, stderr = run.communicate(timeout=120)
            assert run.returncode == 1, stdout + stderr[-3000:]
            outcome = json.loads(stdout.splitlines()[-1])
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.CANCELED  # type: ignore[union-attr]
            # The summary, read as the run ended: nothing indexed, and the step still in its
            # worker (Redis: the run ends at once) or its refusal (RabbitMQ: the run stays
            # CANCELING until the step ended).
            assert outcome["status"] == "failure" and "committed" not in outcome and "new" not in outcome, outcome
            said = str(outcome["message"])
            assert "vector_index was still running in its worker when the run ended" in said or re.search(
                REFUSED.format(run_id), said
            ), outcome

            # The step reaches its commit after the run ended and stops there.
            deadline = time.monotonic() + STEP_END_S
            ended = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
            while not (
                steps := [
                    r
                    for r in instance.get_records_for_run(run_id, of_type=ended).records
                    if r.event_log_entry.step_key == "vector_index"
                ]
            ):
                assert time.monotonic() < deadline, "vector_index did not end in its worker"
                time.sleep(1)
            (failure,) = steps
            assert failure.event_log_entry.dagster_event_type == dg.DagsterEventType.STEP_FAILURE, failure
            error = failure.event_log_entry.dagster_event.step_failure_data.error  # type: ignore[union-attr]
            assert re.search(REFUSED.format(run_id), str(error and error.message)), error
            materialized = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            assets = {r.event_log_entry.dagster_event.asset_key for r in materialized.records}  # type: ignore[union-attr]
            assert dg.AssetKey("vector_index") not in assets, assets
        assert dump(env) == before  # the index as the last commit left it
        statuses = check_statuses(env["FRESHNESS_DAGSTER_URL"], run_id)
        status, description = statuses["reconcile_clean"]
        assert status == "FAILED" and re.search(REFUSED.format(run_id), description or ""), statuses
        assert statuses["freshness_alert"] == ("SKIPPED", None), statuses  # a canceled run's unstarted check

        again = _run(env)
        assert again["status"] == "success", again
        after = dump(env)
        assert len(after) == 4 * 2 and after != before
