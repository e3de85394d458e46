"""The run tags that the assets read and `freshness run` sets. They live apart from the
assets, and from Dagster, so that a process that only launches runs loads neither the asset
graph nor Dagster before its launchers started (`launch.py`)."""

import socket

TIER_TAG = "freshness/tier"
ALLOW_SPIKE_TAG = "freshness/allow-spike"  # an operator's override, recorded in the run's tags
HOST_TAG = "freshness/host"  # where the run's processes run: `liveness.py` judges only this host's


def this_host() -> str:
    return socket.gethostname()


def run_tags(tier: str | None = None, tags: dict[str, str] | None = None) -> dict[str, str]:
    """The tags of a run `freshness run` makes: the caller's, this host, the tier."""
    return {**(tags or {}), HOST_TAG: this_host(), **({TIER_TAG: tier} if tier else {})}
