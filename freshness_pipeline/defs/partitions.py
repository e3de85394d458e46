"""One partition per source, so runs, checks and backfills are per source."""

import dagster as dg

SOURCES = "sources"  # the partitions' name (`.name` is typed optional)
sources_partitions = dg.DynamicPartitionsDefinition(name=SOURCES)
