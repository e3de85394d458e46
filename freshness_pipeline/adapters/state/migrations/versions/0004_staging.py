"""staging: a refresh's work between its stages (extracts, page decisions, sections, plan,
change events, key redirects), keyed by source and run id

Revision ID: 0004
Revises: 0003
"""

from alembic import op
import sqlalchemy as sa


revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_KEY = ("source", "run_id")


def _key() -> list[sa.Column]:
    return [
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
    ]


def upgrade() -> None:
    _staged_runs()
    _staged_extracts()
    _staged_pages()
    _staged_sections()
    _staged_plan()
    _staged_events()
    _staged_redirects()


def _staged_runs() -> None:
    op.create_table(
        "staged_runs",
        *_key(),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("crawl", sa.JSON(), nullable=True),
        sa.Column("sections", sa.JSON(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint(*_KEY),
    )


def _staged_extracts() -> None:
    op.create_table(
        "staged_extracts",
        *_key(),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("markdown", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("date", sa.String(length=10), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(*_KEY, "url"),
    )


def _staged_pages() -> None:
    op.create_table(
        "staged_pages",
        *_key(),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("signature", sa.String(length=64), nullable=True),
        sa.Column("moved_to", sa.String(length=2048), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(*_KEY, "url"),
    )


def _staged_sections() -> None:
    op.create_table(
        "staged_sections",
        *_key(),
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("heading_path", sa.JSON(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("embed_text", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("simhash", sa.BigInteger(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("page_date", sa.String(length=10), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(*_KEY, "id"),
    )
    with op.batch_alter_table("staged_sections", schema=None) as batch_op:
        batch_op.create_index("ix_staged_sections_url", ["source", "run_id", "url"], unique=False)
        batch_op.create_index("ix_staged_sections_hash", ["source", "run_id", "content_hash"], unique=False)


def _staged_plan() -> None:
    op.create_table(
        "staged_plan",
        *_key(),
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("as_of", sa.String(length=10), nullable=True),
        sa.Column("old_id", sa.String(length=128), nullable=True),
        sa.Column("old_url", sa.String(length=2048), nullable=True),
        sa.PrimaryKeyConstraint(*_KEY, "id"),
    )
    with op.batch_alter_table("staged_plan", schema=None) as batch_op:
        batch_op.create_index("ix_staged_plan_action", ["source", "run_id", "action"], unique=False)


def _staged_events() -> None:
    op.create_table(
        "staged_events",
        *_key(),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=True),
        sa.Column("section_keys", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint(*_KEY, "url"),
    )


def _staged_redirects() -> None:
    op.create_table(
        "staged_redirects",
        *_key(),
        sa.Column("old_key", sa.String(length=64), nullable=False),
        sa.Column("new_key", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint(*_KEY, "old_key"),
    )


def downgrade() -> None:
    with op.batch_alter_table("staged_plan", schema=None) as batch_op:
        batch_op.drop_index("ix_staged_plan_action")
    with op.batch_alter_table("staged_sections", schema=None) as batch_op:
        batch_op.drop_index("ix_staged_sections_hash")
        batch_op.drop_index("ix_staged_sections_url")
    for name in (
        "staged_redirects",
        "staged_events",
        "staged_plan",
        "staged_sections",
        "staged_pages",
        "staged_extracts",
        "staged_runs",
    ):
        op.drop_table(name)
