"""response style: Arena-Hard-Auto's Markdown counts of every answer, computed once

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05 07:40:00

Adds to ``response`` the Markdown counts of its text outside fenced code blocks
(judgecal.calibrate.style, docs/style.md): ``md_headers`` (h1-h6), ``md_list_ordered``,
``md_list_unordered``, ``md_bold`` (``**``/``__`` pairs), and fills them for every stored
response (read and written back 2000 rows at a time, in id order). Later rows get them when
they are written (judgecal.db.ingest; the model's column defaults for other SQLAlchemy inserts).

The backfill calls judgecal.calibrate.style.style_counts, the one definition: a change of that
definition is a new migration that recomputes the columns, never an edit of this one.

Downgrade: drops the four columns (nothing is lost: they are computed again from the texts by
the next upgrade).
"""
from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

COLUMNS = ('md_headers', 'md_list_ordered', 'md_list_unordered', 'md_bold')
CHUNK = 2000


def upgrade() -> None:
    from judgecal.calibrate.style import style_counts

    for name in COLUMNS:
        op.add_column('response', sa.Column(name, sa.Integer(), nullable=True))
    conn = op.get_bind()
    read = sa.text("SELECT id, text FROM response WHERE id > :last ORDER BY id LIMIT :n")
    write = sa.text("UPDATE response SET " + ", ".join(f"{c} = :{c}" for c in COLUMNS) + " WHERE id = :id")
    last = -1
    while True:
        rows = conn.execute(read, {"last": last, "n": CHUNK}).all()
        if not rows:
            break
        conn.execute(write, [{"id": rid, **dict(zip(COLUMNS, style_counts(text)))} for rid, text in rows])
        last = rows[-1][0]


def downgrade() -> None:
    # nothing lost (judgecal.db.migration_losses LOSSES["0007"] is empty): the next upgrade recomputes them
    # a plain ALTER TABLE on both dialects (SQLite 3.35+): batch mode would copy the table and lose
    # the triggers migration 0006 put on it
    for name in reversed(COLUMNS):
        op.execute(f"ALTER TABLE response DROP COLUMN {name}")
