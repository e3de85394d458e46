"""Retire a source taken out of the sources file: its vectors and state
(`pipeline/retire.py`), then its partition. The run history stays in the instance.

As a refresh does, it takes the source's run lock, fails the runs a dead `freshness run` left
in flight and waits, within `runs.source_wait_s`, for one of the UI or a sensor to end, so no
run writes the source while it is dropped."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from ..config import Settings
from ..pipeline.retire import Dropped, drop_source
from ..pipeline.source_runs import holding_source
from .partitions import SOURCES
from .runner import end_dead_runs, wait_for_runs_in_flight


@dataclass(frozen=True, slots=True)
class Retired:
    dropped: Dropped
    partition: bool  # whether it had one to delete


def retire(settings: Settings, source: str) -> Retired:
    """Drop the source's namespaces, rows and partition (it must not be in the sources file)."""
    with dg.DagsterInstance.local_temp(str(settings.home)) as instance, holding_source(settings, source) as hold:
        end_dead_runs(instance, settings, hold)
        wait_for_runs_in_flight(instance, source, settings.runs.source_wait_s)
        dropped = drop_source(settings, hold)
        partition = instance.has_dynamic_partition(SOURCES, source)
        if partition:
            instance.delete_dynamic_partition(SOURCES, source)
    return Retired(dropped, partition)
