"""The run tags that the assets read and `freshness run` sets. They live apart from the
assets so that a process that only launches runs doesn't load the asset graph (about half
of a `freshness run`'s start)."""

TIER_TAG = "freshness/tier"
ALLOW_SPIKE_TAG = "freshness/allow-spike"  # an operator's override, recorded in the run's tags
