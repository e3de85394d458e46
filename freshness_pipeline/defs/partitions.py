"""One partition per source, so runs, checks and backfills are per source."""

import dagster as dg

sources_partitions = dg.DynamicPartitionsDefinition(name="sources")
