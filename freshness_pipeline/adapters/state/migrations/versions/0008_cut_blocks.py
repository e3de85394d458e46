"""cut_blocks: the template blocks a page's text had when its indexed sections were cut,
so that a re-index cutting a kept (not fetched again) text strips them too

Revision ID: 0008
Revises: 0007
"""

from alembic import op
import sqlalchemy as sa


revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("pages", "staged_pages"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("cut_blocks", sa.JSON(), nullable=True))


def downgrade() -> None:
    for table in ("pages", "staged_pages"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("cut_blocks")
