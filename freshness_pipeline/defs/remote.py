"""Refreshes submitted to a Dagster deployment through its webserver (`freshness run --submit
URL`, or `$FRESHNESS_DAGSTER_URL`): the runs go through the deployment's run queue, launcher
and executor like the UI's, and this process only waits for them and reads what they did.

Submitting, adding a source's partition, reading a run's status (`runOrError`) and its
failure's message are calls of the webserver's public GraphQL API, each bounded by the
sources file's `runs.graphql_timeout_s`; whatever the server does (refuses, stays silent,
answers garbage, `data: null`, an HTTP error, no such run), the command says so in one
`SubmitError` line. While the run goes, what its workers do (a step waiting for one, a
worker that stopped heartbeating) is said once on stderr (`worker_watch.py`). The summary
is the run's own record in the state store the sources file names, which the deployment's
steps wrote (`pipeline/run_record.py`), read with its status, as for a run executed here;
for a failure no step recorded, the run's failure message as the webserver gives it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..config import Settings
from ..pipeline import run_record
from ..pipeline.errors import ServiceError
from .tags import PARTITION_TAG, run_tags
from .worker_watch import WorkerWatch

URL_ENV = "FRESHNESS_DAGSTER_URL"
LOCATION = "freshness_pipeline"  # workspace.yaml's location name
REPOSITORY = "__repository__"  # the repository of a location's `Definitions`
JOB = "refresh"
PARTITIONS = "sources"
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
PAGE = 1000  # events per query
QUEUED_SAID_AFTER = 3  # reads of a submitted run: one still queued then is said once (no daemon?)

_LAUNCH = """mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on Error { message }
  }
}"""
_RUN = """query($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { status }
    ... on Error { message }
  }
}"""
_ADD_PARTITION = """mutation($selector: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $selector, partitionsDefName: $name, partitionKey: $key) {
    __typename ... on Error { message }
  }
}"""
# The message of the run's failure (what the UI shows on the run's page).
_FAILURE = """query($runId: ID!, $after: String, $limit: Int) {
  logsForRun(runId: $runId, afterCursor: $after, limit: $limit) {
    __typename
    ... on Error { message }
    ... on EventConnection { cursor hasMore events { __typename ... on RunFailureEvent { message } } }
  }
}"""


class SubmitError(ServiceError):
    """The deployment refused the submission, could not be reached or answered nonsense (the
    URL and the cause are named)."""


def submit_refreshes(
    url: str, sources: list[str], settings: Settings, *, tier: str | None = None, tags: dict[str, str] | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Submit one `refresh` run per source to the deployment at `url` (each waits in its
    run queue as the UI's would), then wait for each; yields (source, outcome) in order.
    Every call has `runs.graphql_timeout_s`; a run is waited for `runs.submit_wait_s`."""
    policy = settings.runs
    parts = urlsplit(url if "//" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SubmitError(f"{URL_ENV} / --submit {url!r}: expected the webserver's URL, e.g. http://host:3000")
    path = parts.path.rstrip("/").removesuffix("/graphql")  # the webserver's URL, or its endpoint's
    api = _GraphQL(f"{parts.scheme}://{parts.netloc}{path}/graphql", policy.graphql_timeout_s)
    order = list(dict.fromkeys(sources))
    runs: dict[str, tuple[str, float]] = {}
    for source in order:
        _add_partition(api, source)
        runs[source] = (_launch(api, source, {**run_tags(tier, tags), PARTITION_TAG: source}), time.monotonic())
    for i, source in enumerate(order):
        run_id, since = runs[source]
        try:
            done = _watch(api, run_id, source, settings, since)
        except KeyboardInterrupt:  # this command stops waiting; the runs are the deployment's
            going = ", ".join(f"{s} {runs[s][0]}" for s in order[i:])
            raise KeyboardInterrupt(f"the submitted runs go on in the deployment: {going}") from None
        yield source, done


class _GraphQL:
    """One deployment's GraphQL endpoint: each call bounded by `timeout_s`, each failure one
    `SubmitError` naming the endpoint."""

    def __init__(self, endpoint: str, timeout_s: float) -> None:
        self.endpoint, self.timeout_s = endpoint, timeout_s

    def post(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        try:
            with (
                httpx.Client(timeout=self.timeout_s) as client,
                client.stream("POST", self.endpoint, json={"query": query, "variables": variables}) as response,
            ):
                body = _read_within(response, time.monotonic() + self.timeout_s)
        except httpx.TimeoutException:
            raise SubmitError(f"{self.endpoint}: no answer within {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise SubmitError(f"{self.endpoint}: cannot reach the webserver: {exc or type(exc).__name__}") from None
        if response.status_code != 200:
            raise SubmitError(f"{self.endpoint}: HTTP {response.status_code} {response.reason_phrase}".rstrip())
        try:
            data = json.loads(body)
        except ValueError:
            raise SubmitError(f"{self.endpoint}: the answer is not JSON: not a Dagster webserver?") from None
        errors = data.get("errors") if isinstance(data, dict) else None
        if errors:
            first = errors[0].get("message") if isinstance(errors[0], dict) else errors[0]
            raise SubmitError(f"{self.endpoint}: {first}")
        if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
            raise SubmitError(f"{self.endpoint}: the answer holds no data: not a Dagster webserver?")
        out: dict[str, Any] = data["data"]
        return out

    def field(self, query: str, variables: dict[str, Any], name: str) -> dict[str, Any]:
        """`name` of the answer, an object with its `__typename`."""
        value = self.post(query, variables).get(name)
        if not isinstance(value, dict) or "__typename" not in value:
            raise SubmitError(f"{self.endpoint}: the answer has no {name}: not a Dagster webserver?")
        return value


def _read_within(response: httpx.Response, deadline: float) -> bytes:
    """The body, or a timeout once `deadline` passed (a server that trickles it)."""
    chunks = []
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the answer took too long")
    return b"".join(chunks)


def _launch(api: _GraphQL, source: str, tags: dict[str, str]) -> str:
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": JOB}
    params = {"selector": selector, "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
    result = api.field(_LAUNCH, {"params": params}, "launchRun")
    run_id = (result.get("run") or {}).get("runId") if result["__typename"] == "LaunchRunSuccess" else None
    if not isinstance(run_id, str):
        why = result.get("message") or result["__typename"]
        raise SubmitError(f"{api.endpoint} did not take {source}'s run: {why}")
    return run_id


def _add_partition(api: _GraphQL, source: str) -> None:
    """The source's partition, as `sources_partitions_sensor` would add it (kept if there)."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}
    result = api.field(_ADD_PARTITION, {"selector": selector, "name": PARTITIONS, "key": source}, "addDynamicPartition")
    if result["__typename"] not in ("AddDynamicPartitionSuccess", "DuplicateDynamicPartitionError"):
        raise SubmitError(f"{api.endpoint} did not add partition {source!r}: {result.get('message')}")


def _status(api: _GraphQL, run_id: str) -> str:
    result = api.field(_RUN, {"runId": run_id}, "runOrError")
    if result["__typename"] != "Run" or not isinstance(result.get("status"), str):
        raise SubmitError(f"{api.endpoint}: run {run_id}: {result.get('message') or result['__typename']}")
    return str(result["status"])


def _watch(api: _GraphQL, run_id: str, source: str, settings: Settings, since: float) -> dict[str, Any]:
    """Wait for the run to end (at most `runs.submit_wait_s` after it was submitted) and
    summarize it; says on stderr what its workers do (`WorkerWatch`)."""
    policy = settings.runs
    workers, polls = WorkerWatch(api.field, settings, run_id, source), 0
    while (status := _status(api, run_id)) not in FINISHED:
        if time.monotonic() - since > policy.submit_wait_s:
            raise SubmitError(
                f"{api.endpoint}: run {run_id} of {source} is still {status} after "
                f"{policy.submit_wait_s:g} s (runs.submit_wait_s); it goes on in the deployment"
            )
        if (polls := polls + 1) == QUEUED_SAID_AFTER and status == "QUEUED":
            print(
                f"{source}: run {run_id} is still QUEUED: the deployment's dagster-daemon launches it; "
                f"waiting at most {policy.submit_wait_s:g} s (runs.submit_wait_s)",
                file=sys.stderr,
                flush=True,
            )
        workers.look()
        time.sleep(policy.poll_s)
    record, commit = run_record.read(settings, source, run_id)
    unexplained = status == "FAILURE" and run_record.is_unexplained(record)
    return run_record.outcome(run_id, status, record, commit, _failure_reason(api, run_id) if unexplained else None)


def _failure_reason(api: _GraphQL, run_id: str) -> str | None:
    after, found = None, None
    while True:
        page = api.field(_FAILURE, {"runId": run_id, "after": after, "limit": PAGE}, "logsForRun")
        if page["__typename"] != "EventConnection":
            return None
        found = next((e["message"] for e in page["events"] if e["__typename"] == "RunFailureEvent"), found)
        after = page["cursor"]
        if not page["hasMore"]:
            return f"{run_record.OUTSIDE}: {found.strip()}" if found else None
