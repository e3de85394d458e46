"""run_outcomes: the refresh runs a `freshness run` executes, keyed by Dagster's run id, with
the process that holds the source's run lock for them

Revision ID: 0010
Revises: 0009
"""

from alembic import op
import sqlalchemy as sa


revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_outcomes",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("holder", sa.String(255), nullable=False),
    )
    op.create_index("ix_run_outcomes_source", "run_outcomes", ["source"])


def downgrade() -> None:
    op.drop_index("ix_run_outcomes_source", table_name="run_outcomes")
    op.drop_table("run_outcomes")
