"""The sources file's `runs:`: how long `freshness run` waits, for what it waits on (another
run of the source, a deployment's GraphQL API, a submitted run), and how often a running
step says it is alive."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Seconds = Annotated[float, Field(strict=True, gt=0, le=86_400.0)]


class RunPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # A second local run of a source waits this long for the first, then exits with one line.
    source_wait_s: Seconds = 600.0
    graphql_timeout_s: Annotated[float, Field(strict=True, gt=0, le=600.0)] = 30.0  # each call to --submit's URL
    poll_s: Annotated[float, Field(strict=True, gt=0, le=60.0)] = 1.0  # between two reads of a submitted run
    # A submitted run still not ended this long after it was submitted: the command gives up
    # on it (the run goes on in the deployment). Past the shipped max_runtime_seconds (3600).
    submit_wait_s: Seconds = 7200.0
    # A refresh step beats (`step_beats`) this often while it runs; a step whose last beat is
    # `STALE_BEATS` beats old has lost its worker (pipeline/step_beats.py).
    beat_s: Annotated[float, Field(strict=True, gt=0, le=600.0)] = 10.0
