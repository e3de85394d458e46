"""metrics: freshness time series, golden-set miss counters, re-index requests, weak
queries, cited keys, webhook delivery cursors

Revision ID: 0002
Revises: 0001
"""

from alembic import op
import sqlalchemy as sa


revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _freshness_metrics()
    _golden_misses()
    _reindex_requests()
    _weak_queries()
    _cited_keys()
    _webhook_cursors()


def _freshness_metrics() -> None:
    op.create_table(
        "freshness_metrics",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("measured_at", sa.Float(), nullable=False),
        sa.Column("stale_share", sa.Float(), nullable=False),
        sa.Column("age_median_s", sa.Float(), nullable=True),
        sa.Column("age_p90_s", sa.Float(), nullable=True),
        sa.Column("lag_median_s", sa.Float(), nullable=True),
        sa.Column("lag_p90_s", sa.Float(), nullable=True),
        sa.Column("stale_retrieval_rate", sa.Float(), nullable=True),
        sa.Column("hit_at_1", sa.Float(), nullable=True),
        sa.Column("hit_at_5", sa.Float(), nullable=True),
        sa.Column("mrr", sa.Float(), nullable=True),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("freshness_metrics", schema=None) as batch_op:
        batch_op.create_index("ix_freshness_metrics_source", ["source", "measured_at"], unique=False)


def _golden_misses() -> None:
    op.create_table(
        "golden_misses",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("subject", sa.String(length=2048), nullable=False),
        sa.Column("consecutive", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("source", "kind", "subject"),
    )


def _reindex_requests() -> None:
    op.create_table(
        "reindex_requests",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=False),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("source"),
    )


def _weak_queries() -> None:
    op.create_table(
        "weak_queries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("best_score", sa.Float(), nullable=True),
        sa.Column("best_url", sa.String(length=2048), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("weak_queries", schema=None) as batch_op:
        batch_op.create_index("ix_weak_queries_created", ["created_at"], unique=False)


def _cited_keys() -> None:
    op.create_table(
        "cited_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("cited_keys", schema=None) as batch_op:
        batch_op.create_index("ix_cited_keys_created", ["created_at"], unique=False)


def _webhook_cursors() -> None:
    op.create_table(
        "webhook_cursors",
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("last_event_id", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("url"),
    )


def downgrade() -> None:
    op.drop_table("webhook_cursors")
    with op.batch_alter_table("cited_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_cited_keys_created")
    op.drop_table("cited_keys")
    with op.batch_alter_table("weak_queries", schema=None) as batch_op:
        batch_op.drop_index("ix_weak_queries_created")
    op.drop_table("weak_queries")
    op.drop_table("reindex_requests")
    op.drop_table("golden_misses")
    with op.batch_alter_table("freshness_metrics", schema=None) as batch_op:
        batch_op.drop_index("ix_freshness_metrics_source")
    op.drop_table("freshness_metrics")
