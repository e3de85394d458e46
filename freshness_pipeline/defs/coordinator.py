"""The instance's run coordinator: Dagster's run queue while a daemon dequeues it, an
immediate launch when none runs.

With Dagster's QueuedRunCoordinator alone, a run submitted while no `dagster-daemon` runs
(a `freshness run` on a laptop, the demo, `dagster-webserver` without the daemon) waits in
the queue forever. This one queues exactly as Dagster does (the same config: run limits,
tag limits, pools) when the queue's daemon has sent a heartbeat recently, and otherwise
launches the run at once with the instance's run launcher. Named in dagster.yaml as
`run_coordinator: {module: freshness_pipeline.defs.coordinator, class: QueueWhenDaemonRuns}`.
"""

from __future__ import annotations

import time

import dagster as dg

QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"  # the daemon type that dequeues runs
HEARTBEAT_FRESH_S = 90.0  # the daemon beats every 30 s


def daemon_running(instance: dg.DagsterInstance) -> bool:
    """Whether a daemon dequeuing this instance's run queue beat within HEARTBEAT_FRESH_S."""
    beat = instance.get_daemon_heartbeats().get(QUEUE_DAEMON)
    return beat is not None and time.time() - beat.timestamp < HEARTBEAT_FRESH_S


class QueueWhenDaemonRuns(dg.QueuedRunCoordinator):
    """QueuedRunCoordinator that launches directly when no daemon dequeues."""

    def submit_run(self, context):  # noqa: ANN001, ANN201 - the base class's signature
        instance = context.workspace.instance
        run = context.dagster_run
        if daemon_running(instance) or run.status != dg.DagsterRunStatus.NOT_STARTED:
            return super().submit_run(context)
        return instance.launch_run(run.run_id, context.workspace)
