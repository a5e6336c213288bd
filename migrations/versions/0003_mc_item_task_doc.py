"""multiple-choice items: task, lm-eval doc id, every gold

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 04:30:00

Adds to ``mc_item_result``: ``task`` (the leaf task of an lm-eval run, which may score several
tasks; NULL for a judgecal task file and rows stored before), ``doc_id`` (lm-eval's document
id within that task; NULL likewise) and ``golds`` (every gold index as lm-eval scores it, a JSON
list; NULL when there is one, ``gold``). The requests of each choice are kept in the existing
``choices`` JSON (``request``, ``null_request``).
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('mc_item_result', schema=None) as batch_op:
        batch_op.add_column(sa.Column('task', sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column('doc_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('golds', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('mc_item_result', schema=None) as batch_op:
        batch_op.drop_column('golds')
        batch_op.drop_column('doc_id')
        batch_op.drop_column('task')
