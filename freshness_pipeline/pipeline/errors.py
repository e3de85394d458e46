"""The failures a command reports as one line that names the problem and the way out
(exit 2), never as a traceback: a missing or invalid sources file, damaged or unwritable
state. Re-exported here so that the command line needs no adapter to catch them."""

from __future__ import annotations

from ..adapters.damage import DamagedState
from ..config import ConfigError

REPORTED: tuple[type[Exception], ...] = (ConfigError, DamagedState)

__all__ = ["REPORTED", "ConfigError", "DamagedState"]
