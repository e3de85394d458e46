"""Refreshes submitted to a Dagster deployment through its webserver (`freshness run --submit
URL`, or `$FRESHNESS_DAGSTER_URL`): the runs go through the deployment's run queue, launcher
and executor like the UI's, and this process only waits for them and reads what they did.

Submitting and waiting use dagster-graphql's `DagsterGraphQLClient`; the two reads it has no
method for (adding a source's partition, a run's events) are queries of the same public
GraphQL API. The events are read as the run goes: a step that dagster-celery queued
(its engine event "Submitting celery task for step … to queue …") and no worker started
`WORKER_NOTE_S` later is said once on stderr, "waiting for a worker (queue NAME)". The
summary is `run_summary.outcome`, as for a run executed here.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from .run_summary import Check, RunFacts, failed_checks, outcome, short
from .tags import PARTITION_TAG, run_tags

if TYPE_CHECKING:
    from dagster_graphql import DagsterGraphQLClient

    from ..config import Settings

URL_ENV = "FRESHNESS_DAGSTER_URL"
LOCATION = "freshness_pipeline"  # workspace.yaml's location name
REPOSITORY = "__repository__"  # the repository of a location's `Definitions`
JOB = "refresh"
PARTITIONS = "sources"
POLL_S = 1.0
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
PAGE = 1000  # events per query
CELERY_QUEUE_MARKER = "celery_queue_wait"  # dagster-celery's engine event: a step submitted to its queue
WORKER_NOTE_S = 5.0  # a step submitted this long and started by no worker: said once

_ADD_PARTITION = """mutation($selector: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $selector, partitionsDefName: $name, partitionKey: $key) {
    __typename ... on Error { message }
  }
}"""
# The metadata types of the values `outcome` reads (counts, texts, JSON); an error and its causes.
_EVENTS = """query($runId: ID!, $after: String, $limit: Int) {
  logsForRun(runId: $runId, afterCursor: $after, limit: $limit) {
    __typename
    ... on Error { message }
    ... on EventConnection {
      cursor hasMore
      events {
        __typename
        ... on MaterializationEvent { assetKey { path } metadataEntries { ...M } }
        ... on AssetCheckEvaluationEvent { evaluation { checkName success severity description } }
        ... on ExecutionStepStartEvent { stepKey }
        ... on ExecutionStepSuccessEvent { stepKey }
        ... on ExecutionStepFailureEvent { stepKey error { ...E } }
        ... on EngineEvent { stepKey markerStart message }
        ... on RunFailureEvent { message error { ...E } }
      }
    }
  }
}
fragment M on MetadataEntry {
  label
  ... on IntMetadataEntry { intRepr }
  ... on FloatMetadataEntry { floatValue }
  ... on TextMetadataEntry { text }
  ... on JsonMetadataEntry { jsonString }
}
fragment E on PythonError { className message causes { message } }
"""


class SubmitError(RuntimeError):
    """The deployment refused the submission or could not be reached (the cause is named)."""


def submit_refreshes(
    url: str,
    sources: list[str],
    *,
    tier: str | None = None,
    tags: dict[str, str] | None = None,
    settings: Settings | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Submit one `refresh` run per source to the deployment at `url` (each waits in its
    run queue as the UI's would), then wait for each; yields (source, outcome) in order.
    `settings`: the sources file's, for the summaries (default: $FRESHNESS_SOURCES')."""
    from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

    parts = urlsplit(url if "//" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SubmitError(f"{URL_ENV} / --submit {url!r}: expected the webserver's URL, e.g. http://host:3000")
    client = DagsterGraphQLClient(
        parts.hostname, port_number=parts.port, use_https=parts.scheme == "https", path_prefix=parts.path.rstrip("/")
    )
    endpoint = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/graphql"
    order = list(dict.fromkeys(sources))
    runs: dict[str, str] = {}
    for source in order:
        _add_partition(endpoint, source)
        try:
            runs[source] = client.submit_job_execution(
                JOB,
                repository_location_name=LOCATION,
                repository_name=REPOSITORY,
                tags={**run_tags(tier, tags), PARTITION_TAG: source},
            )
        except DagsterGraphQLClientError as exc:
            raise SubmitError(f"{endpoint} did not take {source}'s run: {exc}") from exc
    for source in order:
        yield source, _watch(client, _Events(endpoint, runs[source], source), settings)


def _post(endpoint: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    try:
        response = httpx.post(endpoint, json={"query": query, "variables": variables}, timeout=60)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise SubmitError(f"{endpoint}: {type(exc).__name__}: {exc}") from exc
    body = response.json()
    if body.get("errors"):
        raise SubmitError(f"{endpoint}: {body['errors'][0].get('message')}")
    data: dict[str, Any] = body["data"]
    return data


def _add_partition(endpoint: str, source: str) -> None:
    """The source's partition, as `sources_partitions_sensor` would add it (kept if there)."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}
    done = _post(endpoint, _ADD_PARTITION, {"selector": selector, "name": PARTITIONS, "key": source})
    result = done["addDynamicPartition"]
    if result["__typename"] not in ("AddDynamicPartitionSuccess", "DuplicateDynamicPartitionError"):
        raise SubmitError(f"{endpoint} did not add partition {source!r}: {result.get('message')}")


class _Events:
    """A run's events, read as they come (`read`), into its `RunFacts`."""

    def __init__(self, endpoint: str, run_id: str, source: str) -> None:
        self.endpoint, self.cursor = endpoint, None
        self.facts = RunFacts(run_id, source, False, "STARTED")
        self.queued: dict[str, tuple[str, float]] = {}  # step -> (Celery queue, when submitted), till it starts

    def read(self) -> None:
        while True:
            variables = {"runId": self.facts.run_id, "after": self.cursor, "limit": PAGE}
            page = _post(self.endpoint, _EVENTS, variables)["logsForRun"]
            if page["__typename"] != "EventConnection":
                raise SubmitError(f"{self.endpoint}: the events of run {self.facts.run_id}: {page.get('message')}")
            for e in page["events"]:
                self._add(e)
            self.cursor = page["cursor"]
            if not page["hasMore"]:
                return

    def _add(self, e: dict[str, Any]) -> None:
        facts, kind = self.facts, e["__typename"]
        if kind == "MaterializationEvent":
            asset = "/".join(e["assetKey"]["path"])
            facts.materialized[asset] = {m["label"]: _value(m) for m in e["metadataEntries"]}
        elif kind == "AssetCheckEvaluationEvent":
            c = e["evaluation"]
            facts.checks.append(Check(c["checkName"], c["severity"], c["success"], c["description"]))
        elif kind == "ExecutionStepStartEvent":
            self.queued.pop(e["stepKey"], None)
            facts.running.append(e["stepKey"])
        elif kind in ("ExecutionStepSuccessEvent", "ExecutionStepFailureEvent") and e["stepKey"] in facts.running:
            facts.running.remove(e["stepKey"])
        elif kind == "EngineEvent" and e["markerStart"] == CELERY_QUEUE_MARKER and e["stepKey"]:
            queue = m.group(1) if (m := re.search(r'to queue "([^"]+)"', e["message"] or "")) else "?"
            self.queued[e["stepKey"]] = (queue, time.monotonic())
        if kind == "ExecutionStepFailureEvent" and e["error"]:  # the step's own error, under Dagster's wrapper
            own = (e["error"]["causes"] or [e["error"]])[0]
            facts.step_failures.append(f"{e['stepKey']}: {short(own['message'])}")
            facts.blocked += failed_checks(e["error"]["className"], e["error"]["message"])
        elif kind == "RunFailureEvent":  # its innermost error; none for a run failed from outside
            error = e["error"] and [e["error"], *e["error"]["causes"]][-1]
            facts.run_failures.append(short(error["message"]) if error else (e["message"] or "").strip())


def _watch(client: DagsterGraphQLClient, events: _Events, settings: Settings | None) -> dict[str, Any]:
    """Wait for the run to end and summarize it; says once, on stderr, when a step of it
    waits for a Celery worker."""
    facts, said = events.facts, False
    while (status := client.get_run_status(facts.run_id).value) not in FINISHED:
        events.read()
        late = [(step, q) for step, (q, since) in events.queued.items() if time.monotonic() - since >= WORKER_NOTE_S]
        if late and not said:
            step, queue = late[0]
            print(
                f"{facts.source}: {step} waiting for a worker (queue {queue}): submitted to Celery, "
                "started by no worker yet",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(POLL_S)
    events.read()
    facts.status, facts.succeeded = status, status == "SUCCESS"
    return outcome(facts, settings)


def _value(entry: dict[str, Any]) -> Any:
    if "intRepr" in entry:
        return int(entry["intRepr"])
    return json.loads(entry["jsonString"]) if "jsonString" in entry else entry.get("floatValue", entry.get("text"))
