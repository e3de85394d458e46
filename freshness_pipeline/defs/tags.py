"""The run tags that the assets read and `freshness run` sets."""

PARTITION_TAG = "dagster/partition"  # Dagster's own: a run's partition (the source)
TIER_TAG = "freshness/tier"
ALLOW_SPIKE_TAG = "freshness/allow-spike"  # an operator's override of the change-spike check
# An operator's release of held pages (`core/quarantine.Release`): "all", kind names and
# page URLs, comma-separated; `freshness release` sets it.
RELEASE_TAG = "freshness/release"


def run_tags(tier: str | None = None, tags: dict[str, str] | None = None) -> dict[str, str]:
    """The tags of a run `freshness run` makes: the caller's and the tier."""
    return {**(tags or {}), **({TIER_TAG: tier} if tier else {})}
