"""staged page rows: the crawl's page rows (and relearned template blocks) wait in staging
until the run's manifest commit promotes them, so a blocked or failed run's observations
never reach `pages`

Revision ID: 0005
Revises: 0004
"""

from alembic import op
import sqlalchemy as sa


revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("staged_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("template_blocks", sa.JSON(), nullable=True))
    op.create_table(
        "staged_page_rows",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("fetch_url", sa.String(length=2048), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("moved_to", sa.String(length=2048), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("etag", sa.String(length=512), nullable=True),
        sa.Column("last_modified", sa.String(length=128), nullable=True),
        sa.Column("body_sha256", sa.String(length=64), nullable=True),
        sa.Column("markdown", sa.Text(), nullable=True),
        sa.Column("text_hash", sa.String(length=64), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("page_date", sa.String(length=10), nullable=True),
        sa.Column("tier", sa.String(length=8), nullable=False),
        sa.Column("flag", sa.Text(), nullable=True),
        sa.Column("miss_count", sa.Integer(), nullable=False),
        sa.Column("error_count", sa.Integer(), nullable=False),
        sa.Column("lastmod", sa.String(length=64), nullable=True),
        sa.Column("first_seen", sa.Float(), nullable=False),
        sa.Column("last_fetched", sa.Float(), nullable=True),
        sa.Column("last_changed", sa.Float(), nullable=True),
        sa.Column("change_times", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("source", "run_id", "url"),
    )


def downgrade() -> None:
    op.drop_table("staged_page_rows")
    with op.batch_alter_table("staged_runs", schema=None) as batch_op:
        batch_op.drop_column("template_blocks")
