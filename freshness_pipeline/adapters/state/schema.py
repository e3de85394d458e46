"""Tables of the state store. Changes here need an Alembic migration (see migrations/)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from ...core.quarantine import Quarantine

metadata = MetaData()


class QuarantineState(TypeDecorator[Quarantine]):
    """A page's `Quarantine`, stored as a JSON object (kind, evidence, started, seen)."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Quarantine | None, dialect: Dialect) -> dict[str, object] | None:
        return None if value is None else value.to_json()

    def process_result_value(self, value: dict[str, object] | None, dialect: Dialect) -> Quarantine | None:
        return None if value is None else Quarantine.from_json(value)


# One row per source: the versions its active index was built with, and where it lives.
sources = Table(
    "sources",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("normalizer_version", String(32), nullable=False),
    Column("chunker_version", String(64), nullable=False),
    Column("embed_model", String(128), nullable=False),
    Column("embed_dims", Integer, nullable=False),
    Column("active_version", Integer, nullable=False),  # index version searches read
    Column("generation", Integer, nullable=False),  # bumped by every manifest commit
    Column("template_blocks", JSON, nullable=False),  # learned repeated-block fingerprints
    Column("retired_namespaces", JSON, nullable=False),  # to drop from the vector store
    Column("updated_at", Float, nullable=False),
)

# The latest observation of every page the source ever had (the crawl state).
pages = Table(
    "pages",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("url", String(2048), primary_key=True),  # normalized identity
    Column("fetch_url", String(2048), nullable=False),
    Column("state", String(16), nullable=False),  # live | gone | moved
    Column("moved_to", String(2048)),
    Column("outcome", String(16)),  # last fetch Outcome
    Column("status_code", Integer),
    Column("reason", Text),
    Column("etag", String(512)),
    Column("last_modified", String(128)),
    Column("body_sha256", String(64)),
    Column("markdown", Text),  # extracted and rule-normalized, before template removal
    Column("text_hash", String(64)),
    Column("title", Text),
    Column("page_date", String(10)),
    Column("indexed_signature", String(64)),  # signature of what the manifest holds
    Column("cut_blocks", JSON),  # the template blocks its text had when those sections were cut
    Column("tier", String(8), nullable=False),
    Column("flag", Text),  # soft 404, bot wall, repeated errors: for review
    Column("miss_count", Integer, nullable=False),
    Column("error_count", Integer, nullable=False),  # consecutive errors
    Column("lastmod", String(64)),
    Column("first_seen", Float, nullable=False),
    Column("last_fetched", Float),
    Column("last_changed", Float),  # last time its normalized text changed
    Column("change_times", JSON, nullable=False),  # recent change timestamps (tiers, flapping)
    Column("quarantine", QuarantineState),  # why its last answer is held (core/quarantine.py)
)

# The manifest: what the active vector index holds, one row per record.
sections = Table(
    "sections",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("id", String(128), primary_key=True),
    Column("key", String(64), nullable=False),
    Column("chunk_index", Integer, nullable=False),
    Column("url", String(2048), nullable=False),
    Column("heading_path", JSON, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("embed_text", Text, nullable=False),  # the retrieval text (core/retrieval.py)
    Column("content_hash", String(64), nullable=False),  # of embed_text: decides embedding
    Column("simhash", BigInteger),  # stored signed: two's complement of the 64-bit value
    Column("tokens", Integer, nullable=False),
    Column("as_of", String(10)),  # declared date when the text last changed, else month first seen
    Column("title", Text),  # the page's title (payload)
    Column("indexed_at", Float, nullable=False),
    Column("changed_at", Float, nullable=False),  # first seen with this content
    Index("ix_sections_source_url", "source", "url"),
    Index("ix_sections_source_key", "source", "key"),
)

# Old section key -> new key, written when a heading is renamed or a page moves.
key_redirects = Table(
    "key_redirects",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("old_key", String(64), primary_key=True),
    Column("new_key", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
)

# Vectors by (model, dimensions, content hash): text already embedded is never paid twice.
embedding_cache = Table(
    "embedding_cache",
    metadata,
    Column("model", String(128), primary_key=True),
    Column("dims", Integer, primary_key=True),
    Column("content_hash", String(64), primary_key=True),
    Column("vector", LargeBinary, nullable=False),  # float32, little endian
    Column("created_at", Float, nullable=False),
)

# Write-ahead intents: ids about to be upserted, cleared by the manifest commit. Whatever
# is left here after a crash is checked against the manifest by the next run.
pending_writes = Table(
    "pending_writes",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("namespace", String(160), primary_key=True),
    Column("id", String(128), primary_key=True),
)

# One row per finished refresh.
runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("run_id", String(64)),
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float, nullable=False),
    Column("counts", JSON, nullable=False),
    Column("reason", Text),  # why a full re-index happened, if it did
    Index("ix_runs_source", "source", "finished_at"),
)

# Each source's last refresh attempt, whatever its outcome (a failed or blocked run commits
# nothing to `runs`): what `freshness status` shows beside the last success.
last_attempts = Table(
    "last_attempts",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64)),
    Column("finished_at", Float, nullable=False),
    Column("status", String(16), nullable=False),  # success | blocked | failure
    Column("message", Text),
)

# Every refresh run (Dagster's run id) and what it did, written by its own steps (migration
# 0012): `facts` holds the counts, holds, checks that failed or blocked and step errors;
# `status` is ours (running | success | blocked | failure). `holder` ("host pid N") is set for
# a run a `freshness run` executed under its source's run lock, held for the run's whole
# life: a run still in flight in Dagster whose lock is free has lost its process.
run_outcomes = Table(
    "run_outcomes",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("source", String(64), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("holder", String(255)),
    Column("tier", String(32)),
    Column("status", String(16)),
    Column("finished_at", Float),
    Column("facts", JSON),
    Index("ix_run_outcomes_source", "source"),
)

# Each step of a run that is executing, with the process executing it ("host pid N") and its
# last heartbeat; `starts` counts its starts in the run (above 1: its task came back from the
# queue after its worker stopped).
step_beats = Table(
    "step_beats",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("step", String(64), primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("beat_at", Float, nullable=False),
    Column("starts", Integer, nullable=False),
)

# Outbox of change events (new / changed / gone pages), written in the commit transaction.
change_events = Table(
    "change_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("content_hash", String(64)),
    Column("section_keys", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_change_events_source", "source", "id"),
)

# -- metrics (migration 0002) ------------------------------------------------------------

# One row per source per run: the freshness time series (see docs/metrics.md).
freshness_metrics = Table(
    "freshness_metrics",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("run_id", String(64)),
    Column("measured_at", Float, nullable=False),
    Column("stale_share", Float, nullable=False),
    Column("age_median_s", Float),
    Column("age_p90_s", Float),
    Column("lag_median_s", Float),
    Column("lag_p90_s", Float),
    Column("stale_retrieval_rate", Float),  # None without a golden set
    Column("hit_at_1", Float),
    Column("hit_at_5", Float),
    Column("mrr", Float),
    Column("score", Float, nullable=False),
    Column("details", JSON, nullable=False),  # golden misses, counts behind the figures
    Index("ix_freshness_metrics_source", "source", "measured_at"),
)

# Consecutive and total golden-set misses per query and per expected section.
golden_misses = Table(
    "golden_misses",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("kind", String(8), primary_key=True),  # query | section
    Column("subject", String(2048), primary_key=True),  # the query text, or the expected key/URL
    Column("consecutive", Integer, nullable=False),
    Column("total", Integer, nullable=False),
    Column("runs", Integer, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# A full re-index asked for outside a version bump (e.g. repeated golden misses). The
# section stage honours it; it is cleared once the active version has moved past it.
reindex_requests = Table(
    "reindex_requests",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("reason", Text, nullable=False),
    Column("from_version", Integer, nullable=False),  # the active version when asked
    Column("requested_at", Float, nullable=False),
)

# Searches whose best cosine similarity fell under the model's threshold. Nothing about
# who asked; purged after 90 days.
weak_queries = Table(
    "weak_queries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("query", Text, nullable=False),
    Column("model", String(128), nullable=False),
    Column("best_score", Float),
    Column("best_url", String(2048)),
    Column("created_at", Float, nullable=False),
    Column("source", String(64)),  # of the best match; empty for a search recorded before it was kept
    Index("ix_weak_queries_created", "created_at"),
)

# Section keys returned by searches (the citations handed out), for the resolution rate.
cited_keys = Table(
    "cited_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("key", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_cited_keys_created", "created_at"),
)

# Per webhook: the last change event it acknowledged with a 2xx (outbox delivery cursor).
webhook_cursors = Table(
    "webhook_cursors",
    metadata,
    Column("url", String(2048), primary_key=True),
    Column("last_event_id", Integer, nullable=False),
    Column("attempts", Integer, nullable=False),  # failed deliveries since the last success
    Column("last_error", Text),
    Column("updated_at", Float, nullable=False),
)

# -- staging (migration 0004) --------------------------------------------------------------
# One refresh's work between its stages, keyed by source and run id: written in batches by
# one stage, read in batches by the next, dropped by the commit and by the next run's start
# (`staging/`). Nothing outside a run reads them.

# A run whose stages staged work: which stage finished (`{"finished_at": ...}` once it did).
staged_runs = Table(
    "staged_runs",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("started_at", Float, nullable=False),
    Column("crawl", JSON),  # set once stage 1 finished
    Column("sections", JSON),  # set once stage 2 finished
    Column("plan", JSON),  # set once stage 3 finished
    # migration 0005: the template blocks the crawl learned, None when it kept the source's
    Column("template_blocks", JSON),
)

# Stage 1: what extraction made of each page fetched with a body, until the crawl applied it.
staged_extracts = Table(
    "staged_extracts",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("url", String(2048), primary_key=True),
    Column("markdown", Text, nullable=False),
    Column("title", Text),
    Column("date", String(10)),
    Column("error", Text),
)

# Stage 1 (migration 0005): the page rows the crawl decided, until the commit promotes
# them into `pages` (a blocked or failed run's never reach it). A NULL `markdown` keeps the
# committed text; `indexed_signature` is the commit's own.
staged_page_rows = Table(
    "staged_page_rows",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("url", String(2048), primary_key=True),
    Column("fetch_url", String(2048), nullable=False),
    Column("state", String(16), nullable=False),
    Column("moved_to", String(2048)),
    Column("outcome", String(16)),
    Column("status_code", Integer),
    Column("reason", Text),
    Column("etag", String(512)),
    Column("last_modified", String(128)),
    Column("body_sha256", String(64)),
    Column("markdown", Text),
    Column("text_hash", String(64)),
    Column("title", Text),
    Column("page_date", String(10)),
    Column("tier", String(8), nullable=False),
    Column("flag", Text),
    Column("miss_count", Integer, nullable=False),
    Column("error_count", Integer, nullable=False),
    Column("lastmod", String(64)),
    Column("first_seen", Float, nullable=False),
    Column("last_fetched", Float),
    Column("last_changed", Float),
    Column("change_times", JSON, nullable=False),
    Column("quarantine", QuarantineState),
)

# Stage 2: every page whose sections change: its new signature (None: its sections go),
# where it moved, or why it could not be segmented (its sections stay as they are).
staged_pages = Table(
    "staged_pages",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("url", String(2048), primary_key=True),
    Column("signature", String(64)),
    Column("cut_blocks", JSON),
    Column("moved_to", String(2048)),
    Column("error", Text),
)

# Stage 2: the current sections of the re-segmented pages (columns as in `sections`).
staged_sections = Table(
    "staged_sections",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("id", String(128), primary_key=True),
    Column("key", String(64), nullable=False),
    Column("chunk_index", Integer, nullable=False),
    Column("url", String(2048), nullable=False),
    Column("heading_path", JSON, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("embed_text", Text, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("simhash", BigInteger),
    Column("tokens", Integer, nullable=False),
    Column("page_date", String(10)),
    Column("title", Text),
    Index("ix_staged_sections_url", "source", "run_id", "url"),
    Index("ix_staged_sections_hash", "source", "run_id", "content_hash"),
)

# Stage 3: the plan, one row per current section (its action and settled `as_of`) and per
# record to delete (`removed`; a moved section's old id is its row's `old_id`).
staged_plan = Table(
    "staged_plan",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("id", String(128), primary_key=True),
    Column("action", String(16), nullable=False),  # new|changed|moved|payload|unchanged|fuzzy|removed
    Column("url", String(2048), nullable=False),
    Column("as_of", String(10)),
    Column("old_id", String(128)),
    Column("old_url", String(2048)),
    Index("ix_staged_plan_action", "source", "run_id", "action"),
)

# Stage 3: the change events the commit will record (one per page; gone pages sort last).
staged_events = Table(
    "staged_events",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("url", String(2048), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("content_hash", String(64)),
    Column("section_keys", JSON, nullable=False),
)

# Stage 3: the key redirects the plan records.
staged_redirects = Table(
    "staged_redirects",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("old_key", String(64), primary_key=True),
    Column("new_key", String(64), nullable=False),
)
