"""Whether the sensors that launch runs start on: `$FRESHNESS_SENSORS`, read when the code
location loads. Off by default, as Dagster's own sensors are: `dg dev` on a laptop crawls
nothing until someone turns a sensor on (the UI's Automation page) or the deployment sets
`FRESHNESS_SENSORS=on` in the environment of the processes that load the code location."""

import os

import dagster as dg

from ..config import ConfigError

SENSORS_ENV = "FRESHNESS_SENSORS"
ON, OFF = ("on", "true", "1", "yes"), ("off", "false", "0", "no", "")


def launching_sensors_status() -> dg.DefaultSensorStatus:
    """The default status of `tier_cadence_sensor`, `version_bump_sensor` and
    `source_freshness_sensor`; a value other than on/off names the setting."""
    value = os.environ.get(SENSORS_ENV, "").strip().lower()
    if value in ON:
        return dg.DefaultSensorStatus.RUNNING
    if value in OFF:
        return dg.DefaultSensorStatus.STOPPED
    raise ConfigError(f"${SENSORS_ENV}={value!r}: expected on or off (the sensors that launch runs start on or off)")
