"""`dg dev` on a laptop crawls nothing by itself: the sensors that launch runs load stopped
unless the deployment sets FRESHNESS_SENSORS=on; the ones that launch nothing load running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_pipeline.config import ConfigError
from freshness_pipeline.defs.automation import launching_sensors_status

REPO = Path(__file__).resolve().parents[2]
LAUNCHING = {"tier_cadence_sensor", "version_bump_sensor", "source_freshness_sensor"}
QUIET = {"sources_partitions_sensor", "failed_refresh_attempts", "canceled_refresh_attempts"}
PRINT_STATUSES = (
    "import json; from freshness_pipeline.defs.definitions import defs; "
    "print(json.dumps({s.name: s.default_status.value for s in defs.sensors}))"
)


def _statuses(tmp_path: Path, **env: str) -> dict[str, str]:
    """The sensors' default statuses as a process loading the code location sees them."""
    base = {k: v for k, v in os.environ.items() if k != "FRESHNESS_SENSORS"}
    done = subprocess.run(
        [sys.executable, "-c", PRINT_STATUSES],
        cwd=tmp_path,
        env={**base, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_sensors_that_launch_runs_load_stopped_unless_the_deployment_turns_them_on(tmp_path: Path) -> None:
    laptop = _statuses(tmp_path)
    assert set(laptop) == LAUNCHING | QUIET
    assert {name for name, status in laptop.items() if status == "RUNNING"} == QUIET
    deployed = _statuses(tmp_path, FRESHNESS_SENSORS="on")
    assert set(deployed.values()) == {"RUNNING"}


def test_a_value_other_than_on_or_off_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRESHNESS_SENSORS", "sometimes")
    with pytest.raises(ConfigError, match=r"\$FRESHNESS_SENSORS='sometimes': expected on or off"):
        launching_sensors_status()
