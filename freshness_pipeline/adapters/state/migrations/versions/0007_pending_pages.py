"""pending: what a page was held for as an outage signature (the text it turned into, or
"gone"), taken only when the next run's fetch sees the same

Revision ID: 0007
Revises: 0006
"""

from alembic import op
import sqlalchemy as sa


revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("pages", "staged_page_rows"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("pending", sa.String(length=64), nullable=True))


def downgrade() -> None:
    for table in ("pages", "staged_page_rows"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("pending")
