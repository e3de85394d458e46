"""weak_query_source: the source of a weak search's best match, so that the `weak` frame
joins the others on `source`

Revision ID: 0011
Revises: 0010
"""

from alembic import op
import sqlalchemy as sa


revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("weak_queries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("weak_queries", schema=None) as batch_op:
        batch_op.drop_column("source")
