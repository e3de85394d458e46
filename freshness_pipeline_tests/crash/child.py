"""Refreshes in a child process that the tests can have SIGKILLed mid-run.

Children fork from a forkserver that has already imported the pipeline, so a child starts
in milliseconds, not seconds; each is a real process and dies by a real SIGKILL (the
`FRESHNESS_CRASH_AT` hook of `pipeline/indexing.py`). The refresh is the four stages of the
`refresh` job called directly (crawl -> sections -> plan -> commit protocol), without the
Dagster run around them; tests that need Dagster drive `freshness run` instead.

Every embedder call of a child is appended to a log file (one line per call: the number of
texts) with an unbuffered write right after the embedder returns, so the count survives
the kill and covers paid work the run never got to cache.
"""

from __future__ import annotations

import multiprocessing
import os
import uuid
from pathlib import Path

_PRELOAD = [
    # The slow parts of `import lancedb`, which the store imports on first use: its
    # namespace's pydantic models (warm.py, without the REST client's endpoints, as the store
    # imports it) and what `lancedb.common` imports, pyarrow.dataset (which imports pandas
    # where it is installed). Not lancedb itself: its import starts an event-loop thread,
    # which a fork would leave behind, holding whatever lock it held.
    "freshness_pipeline_tests.crash.warm",
    "pyarrow.dataset",
    "freshness_pipeline.pipeline.crawl",
    "freshness_pipeline.pipeline.sections",
    "freshness_pipeline.pipeline.planning",
    "freshness_pipeline.pipeline.indexing",
    "freshness_pipeline.adapters.vectorstores.lancedb_store",
    "freshness_pipeline.adapters.embedders.hashing",
    "freshness_pipeline_tests.crash.child",
]
_ctx = multiprocessing.get_context("forkserver")
_ctx.set_forkserver_preload(_PRELOAD)


def refresh(
    sources: Path, source: str, home: Path, *, crash: str | None = None, embed_log: Path, state_url: str | None = None
) -> int:
    """One refresh of `source` in a child process. Returns its exit code (-9: SIGKILLed; 1:
    it raised, and `error_file(embed_log)` holds the error)."""
    child = _ctx.Process(target=_main, args=(str(sources), source, str(home), crash, str(embed_log), state_url))
    child.start()
    child.join(120)
    if child.exitcode is None:
        child.kill()
        raise TimeoutError(f"refresh child (crash={crash}) hung")
    return child.exitcode


def error_file(embed_log: Path) -> Path:
    return embed_log.with_suffix(".errors")


def texts_embedded(embed_log: Path) -> int:
    return sum(int(n) for n in embed_log.read_text().split()) if embed_log.exists() else 0


def _main(sources: str, source: str, home: str, crash: str | None, embed_log: str, state_url: str | None) -> None:
    # A forkserver child inherits the server's environment, not the test's: set it here.
    os.environ["FRESHNESS_SOURCES"] = sources
    os.environ["DAGSTER_HOME"] = home
    os.environ.pop("FRESHNESS_STATE_URL", None)
    if state_url:
        os.environ["FRESHNESS_STATE_URL"] = state_url
    from freshness_pipeline.pipeline import indexing

    if crash:
        os.environ[indexing.CRASH_ENV] = crash
    _count_embeds(embed_log)
    from freshness_pipeline.config import load_settings
    from freshness_pipeline.pipeline.context import SourceContext
    from freshness_pipeline.pipeline.crawl import crawl
    from freshness_pipeline.pipeline.maintenance import migrate
    from freshness_pipeline.pipeline.planning import stage_plan
    from freshness_pipeline.pipeline.sections import stage_sections

    migrate(load_settings())  # as a run's first stage does
    ctx = SourceContext.open(load_settings(), source)
    run_id = uuid.uuid4().hex
    try:
        planned = stage_plan(ctx, stage_sections(ctx, crawl(ctx, run_id=run_id)))
        indexing.apply_plan(ctx, planned, run_id=run_id)
    except Exception as exc:
        with error_file(Path(embed_log)).open("a") as fh:
            fh.write(f"{type(exc).__name__}: {exc}\n")
        raise
    finally:
        ctx.close()


def _count_embeds(embed_log: str) -> None:
    from freshness_pipeline.adapters.embedders.hashing import HashingEmbedder

    fd = os.open(embed_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    embed = HashingEmbedder.embed

    def counted(self: HashingEmbedder, texts):  # type: ignore[no-untyped-def]
        out = embed(self, texts)
        os.write(fd, f"{len(texts)}\n".encode())
        return out

    HashingEmbedder.embed = counted  # type: ignore[method-assign]
