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

metadata = MetaData()

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
    Column("tier", String(8), nullable=False),
    Column("flag", Text),  # soft 404, bot wall, repeated errors: for review
    Column("miss_count", Integer, nullable=False),
    Column("error_count", Integer, nullable=False),  # consecutive errors
    Column("lastmod", String(64)),
    Column("first_seen", Float, nullable=False),
    Column("last_fetched", Float),
    Column("last_changed", Float),  # last time its normalized text changed
    Column("change_times", JSON, nullable=False),  # recent change timestamps (tiers, flapping)
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
    Column("embed_text", Text, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("simhash", BigInteger),  # stored signed: two's complement of the 64-bit value
    Column("tokens", Integer, nullable=False),
    Column("page_date", String(7)),
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
