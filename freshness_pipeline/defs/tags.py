"""The run tags that the assets read and `freshness run` sets."""

PARTITION_TAG = "dagster/partition"  # Dagster's own: a run's partition (the source)
TIER_TAG = "freshness/tier"
ALLOW_SPIKE_TAG = "freshness/allow-spike"  # an operator's override, recorded in the run's tags


def run_tags(tier: str | None = None, tags: dict[str, str] | None = None) -> dict[str, str]:
    """The tags of a run `freshness run` makes: the caller's and the tier."""
    return {**(tags or {}), **({TIER_TAG: tier} if tier else {})}
