"""run_facts: what each refresh run did, written by its own steps (`run_outcomes`, now for
every run, not only those a `freshness run` executed), and the steps' heartbeats
(`step_beats`), so that a worker that stopped is seen

Revision ID: 0012
Revises: 0011
"""

from alembic import op
import sqlalchemy as sa


revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_outcomes", schema=None) as batch_op:
        batch_op.alter_column("holder", existing_type=sa.String(255), nullable=True)
        batch_op.add_column(sa.Column("tier", sa.String(32), nullable=True))
        batch_op.add_column(sa.Column("status", sa.String(16), nullable=True))
        batch_op.add_column(sa.Column("finished_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("facts", sa.JSON(), nullable=True))
    op.create_table(
        "step_beats",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("step", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("beat_at", sa.Float(), nullable=False),
        sa.Column("starts", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("step_beats")
    with op.batch_alter_table("run_outcomes", schema=None) as batch_op:
        batch_op.drop_column("facts")
        batch_op.drop_column("finished_at")
        batch_op.drop_column("status")
        batch_op.drop_column("tier")
        batch_op.alter_column("holder", existing_type=sa.String(255), nullable=False)
