"""A refresh's work between its stages, in the state database (the `staged_*` tables).

Each stage writes what the next one needs in batches, under the source and the id of the
run whose crawl opened the staging, and the next stage reads it back in batches: no
stage's bulk output travels through Dagster, and a step in another process (the Celery
executor) reads the same rows. One repository per stage, as the store is split by concern:

- `StagedRuns` (`staged_runs`): which runs have staging, and which of their stages finished;
- `CrawlStaging`: the crawl's extracts, page rows and learned template blocks;
- `SectionStaging`: the section stage's page decisions and current sections;
- `PlanStaging`: the plan's rows, change events and key redirects.

A run's staging is dropped by its manifest commit, and every other run's by the start of a
later run's crawl (`StagedRuns.begin`): a killed run's staging never reaches a later run's plan.
"""

from .crawl import CrawlStaging, promote_page_rows
from .plan import PlanRow, PlanStaging
from .runs import Stage, StagedRuns, StagingGone, rerun_hint
from .sections import SectionStaging, StagedPage

__all__ = [
    "CrawlStaging",
    "PlanRow",
    "PlanStaging",
    "SectionStaging",
    "Stage",
    "StagedPage",
    "StagedRuns",
    "StagingGone",
    "promote_page_rows",
    "rerun_hint",
]
