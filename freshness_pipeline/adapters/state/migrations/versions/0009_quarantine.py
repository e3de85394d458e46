"""quarantine: a page's typed hold (kind, evidence, started, seen) in place of `pending`

A page pending "gone" is held as gone; one flagged near-empty keeps its key as a
near-empty hold; any other pending text is held as rewritten with no evidence, so the
next run that sees it starts its count again.

Revision ID: 0009
Revises: 0008
"""

from alembic import op
import sqlalchemy as sa


revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_TABLES = ("pages", "staged_page_rows")


def _state(pending: str, flag: str | None, since: float | None) -> dict[str, object]:
    if pending == "gone":
        kind, evidence = "gone", "gone"
    elif (flag or "").startswith("turned near-empty"):
        kind, evidence = "near_empty", pending
    else:
        kind, evidence = "rewritten", ""
    return {"kind": kind, "evidence": evidence, "started": since or 0.0, "seen": 1}


def upgrade() -> None:
    bind = op.get_bind()
    for name in _TABLES:
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.add_column(sa.Column("quarantine", sa.JSON(), nullable=True))
        keys = ["source", "url"] + (["run_id"] if name == "staged_page_rows" else [])
        t = sa.table(name, *(sa.column(k) for k in keys), sa.column("pending"), sa.column("flag"),
                     sa.column("last_fetched"), sa.column("quarantine", sa.JSON()))
        rows = bind.execute(sa.select(t).where(t.c.pending.is_not(None))).mappings().all()
        for r in rows:
            where = sa.and_(*(t.c[k] == r[k] for k in keys))
            bind.execute(sa.update(t).where(where).values(quarantine=_state(r["pending"], r["flag"], r["last_fetched"])))
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.drop_column("pending")


def downgrade() -> None:
    bind = op.get_bind()
    for name in _TABLES:
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.add_column(sa.Column("pending", sa.String(length=64), nullable=True))
        t = sa.table(name, sa.column("source"), sa.column("url"), sa.column("pending"), sa.column("quarantine", sa.JSON()))
        q = sa.select(t.c.source, t.c.url, t.c.quarantine).where(t.c.quarantine.is_not(None))
        for r in bind.execute(q).mappings().all():
            held = r["quarantine"]
            pending = "gone" if held["kind"] == "gone" else held["evidence"][:64] or None
            bind.execute(sa.update(t).where(t.c.source == r["source"], t.c.url == r["url"]).values(pending=pending))
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.drop_column("quarantine")
