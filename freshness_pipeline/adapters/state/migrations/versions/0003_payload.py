"""payload: the manifest keeps each section's `as_of` and page title instead of the
guessed page month (dates are payload, never part of what is embedded)

Existing rows get `as_of` = the month they were first indexed with their text
(`changed_at`): the old `page_date` may have been guessed from body text.

Revision ID: 0003
Revises: 0002
"""

import time

from alembic import op
import sqlalchemy as sa


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("as_of", sa.String(length=10), nullable=True))
        batch_op.add_column(sa.Column("title", sa.Text(), nullable=True))
    conn = op.get_bind()
    sections = sa.table(
        "sections", sa.column("source"), sa.column("id"), sa.column("changed_at"), sa.column("as_of")
    )
    rows = conn.execute(sa.select(sections.c.source, sections.c.id, sections.c.changed_at)).all()
    if rows:
        conn.execute(
            sections.update()
            .where(sections.c.source == sa.bindparam("b_source"), sections.c.id == sa.bindparam("b_id"))
            .values(as_of=sa.bindparam("b_as_of")),
            [
                {"b_source": r.source, "b_id": r.id, "b_as_of": time.strftime("%Y-%m", time.gmtime(r.changed_at))}
                for r in rows
            ],
        )
    with op.batch_alter_table("sections", schema=None) as batch_op:
        batch_op.drop_column("page_date")


def downgrade() -> None:
    with op.batch_alter_table("sections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("page_date", sa.String(length=7), nullable=True))
    op.execute("UPDATE sections SET page_date = substr(as_of, 1, 7)")
    with op.batch_alter_table("sections", schema=None) as batch_op:
        batch_op.drop_column("title")
        batch_op.drop_column("as_of")
