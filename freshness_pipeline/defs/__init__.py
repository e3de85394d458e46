"""Dagster definitions: assets, checks, sensors and resources on top of the pipeline."""
