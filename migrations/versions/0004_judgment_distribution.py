"""judgment distributions on ratings and pairwise verdicts

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 16:50:00

Adds ``distribution`` (JSON, NULL when none was read) to ``rating`` and ``pairwise_judgment``:
the judge's probability for every verdict of the scale (normalised over the scale), the mass
that fell outside it, and how it was read (an API judge's top_logprobs, or the local model's
forward pass); judgecal.judge.distribution describes the object. Rows stored before keep NULL.
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ('rating', 'pairwise_judgment'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('distribution', sa.JSON(), nullable=True))


def downgrade() -> None:
    for table in ('pairwise_judgment', 'rating'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('distribution')
