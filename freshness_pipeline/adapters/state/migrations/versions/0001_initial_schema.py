"""initial schema

Revision ID: 0001
Revises: 
"""

from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    _change_events()
    _embedding_cache()
    _key_redirects()
    _pages()
    _pending_writes()
    _runs()
    _sections()
    _sources()


def _change_events() -> None:
    op.create_table('change_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=True),
    sa.Column('section_keys', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('change_events', schema=None) as batch_op:
        batch_op.create_index('ix_change_events_source', ['source', 'id'], unique=False)


def _embedding_cache() -> None:
    op.create_table('embedding_cache',
    sa.Column('model', sa.String(length=128), nullable=False),
    sa.Column('dims', sa.Integer(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('vector', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('model', 'dims', 'content_hash')
    )


def _key_redirects() -> None:
    op.create_table('key_redirects',
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('old_key', sa.String(length=64), nullable=False),
    sa.Column('new_key', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('source', 'old_key')
    )


def _pages() -> None:
    op.create_table('pages',
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=False),
    sa.Column('fetch_url', sa.String(length=2048), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('moved_to', sa.String(length=2048), nullable=True),
    sa.Column('outcome', sa.String(length=16), nullable=True),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('etag', sa.String(length=512), nullable=True),
    sa.Column('last_modified', sa.String(length=128), nullable=True),
    sa.Column('body_sha256', sa.String(length=64), nullable=True),
    sa.Column('markdown', sa.Text(), nullable=True),
    sa.Column('text_hash', sa.String(length=64), nullable=True),
    sa.Column('title', sa.Text(), nullable=True),
    sa.Column('page_date', sa.String(length=10), nullable=True),
    sa.Column('indexed_signature', sa.String(length=64), nullable=True),
    sa.Column('tier', sa.String(length=8), nullable=False),
    sa.Column('flag', sa.Text(), nullable=True),
    sa.Column('miss_count', sa.Integer(), nullable=False),
    sa.Column('error_count', sa.Integer(), nullable=False),
    sa.Column('lastmod', sa.String(length=64), nullable=True),
    sa.Column('first_seen', sa.Float(), nullable=False),
    sa.Column('last_fetched', sa.Float(), nullable=True),
    sa.Column('last_changed', sa.Float(), nullable=True),
    sa.Column('change_times', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('source', 'url')
    )


def _pending_writes() -> None:
    op.create_table('pending_writes',
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('namespace', sa.String(length=160), nullable=False),
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.PrimaryKeyConstraint('source', 'namespace', 'id')
    )


def _runs() -> None:
    op.create_table('runs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=True),
    sa.Column('started_at', sa.Float(), nullable=False),
    sa.Column('finished_at', sa.Float(), nullable=False),
    sa.Column('counts', sa.JSON(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index('ix_runs_source', ['source', 'finished_at'], unique=False)


def _sections() -> None:
    op.create_table('sections',
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('chunk_index', sa.Integer(), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=False),
    sa.Column('heading_path', sa.JSON(), nullable=False),
    sa.Column('ordinal', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('embed_text', sa.Text(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('simhash', sa.BigInteger(), nullable=True),
    sa.Column('tokens', sa.Integer(), nullable=False),
    sa.Column('page_date', sa.String(length=7), nullable=True),
    sa.Column('indexed_at', sa.Float(), nullable=False),
    sa.Column('changed_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('source', 'id')
    )
    with op.batch_alter_table('sections', schema=None) as batch_op:
        batch_op.create_index('ix_sections_source_key', ['source', 'key'], unique=False)
        batch_op.create_index('ix_sections_source_url', ['source', 'url'], unique=False)


def _sources() -> None:
    op.create_table('sources',
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('normalizer_version', sa.String(length=32), nullable=False),
    sa.Column('chunker_version', sa.String(length=64), nullable=False),
    sa.Column('embed_model', sa.String(length=128), nullable=False),
    sa.Column('embed_dims', sa.Integer(), nullable=False),
    sa.Column('active_version', sa.Integer(), nullable=False),
    sa.Column('generation', sa.Integer(), nullable=False),
    sa.Column('template_blocks', sa.JSON(), nullable=False),
    sa.Column('retired_namespaces', sa.JSON(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('source')
    )


def downgrade() -> None:
    # ### commands auto generated by Alembic - please adjust! ###
    op.drop_table('sources')
    with op.batch_alter_table('sections', schema=None) as batch_op:
        batch_op.drop_index('ix_sections_source_url')
        batch_op.drop_index('ix_sections_source_key')

    op.drop_table('sections')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_source')

    op.drop_table('runs')
    op.drop_table('pending_writes')
    op.drop_table('pages')
    op.drop_table('key_redirects')
    op.drop_table('embedding_cache')
    with op.batch_alter_table('change_events', schema=None) as batch_op:
        batch_op.drop_index('ix_change_events_source')

    op.drop_table('change_events')
    # ### end Alembic commands ###
