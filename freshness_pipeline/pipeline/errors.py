"""The failures a command reports as one line that names the problem and the way out
(exit 2), never as a traceback: a missing or invalid sources file, damaged or unwritable
state. Re-exported here so that the command line needs no adapter to catch them."""

from __future__ import annotations

from ..adapters.damage import DamagedState
from ..config import ConfigError


class ServiceError(RuntimeError):
    """A service the command was pointed at (a deployment's webserver) cannot be used: the
    message names it and why."""


class SourceWaitExpired(RuntimeError):
    """Another run of the source was still going when `runs.source_wait_s` ran out."""


REPORTED: tuple[type[Exception], ...] = (ConfigError, DamagedState, ServiceError, SourceWaitExpired)

__all__ = ["REPORTED", "ConfigError", "DamagedState", "ServiceError", "SourceWaitExpired"]


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C stopped `source`'s refresh: `committed` says whether its commit had landed
    (its outcome was reported before this was raised); `not_run`: the sources not started."""

    def __init__(self, source: str, committed: bool, not_run: list[str]) -> None:
        self.source, self.committed, self.not_run = source, committed, not_run
        what = "its commit had landed (reported above)" if committed else "nothing of its run was committed"
        rest = f"; not run: {', '.join(not_run)}" if not_run else ""
        super().__init__(f"{source}: {what}{rest}")
