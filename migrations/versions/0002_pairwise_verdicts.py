"""pairwise verdicts: soft preference, baseline relation, source file

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 05:40:00

Adds to ``pairwise_judgment``: ``preference`` (probability in [0, 1] that response_a is
preferred; existing ok rows are filled from their verdict: a = 1, b = 0, tie = 0.5),
``baseline_side`` ('a' | 'b' | NULL) and ``source`` (imported file, NULL when collected); the
position may be 'na' (order shown not recorded by the source).
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('pairwise_judgment', schema=None) as batch_op:
        batch_op.add_column(sa.Column('preference', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('baseline_side', sa.String(length=1), nullable=True))
        batch_op.add_column(sa.Column('source', sa.String(length=500), nullable=True))
        batch_op.create_check_constraint(
            'preference', "preference IS NULL OR (preference >= 0 AND preference <= 1)")
        batch_op.create_check_constraint('baseline_side', "baseline_side IS NULL OR baseline_side IN ('a','b')")
        batch_op.drop_constraint('position', type_='check')
        batch_op.create_check_constraint('position', "position IN ('ab','ba','na')")
    op.execute(
        "UPDATE pairwise_judgment SET preference = CASE verdict WHEN 'a' THEN 1.0 WHEN 'b' THEN 0.0 "
        "WHEN 'tie' THEN 0.5 END WHERE status = 'ok' AND verdict IS NOT NULL"
    )


def downgrade() -> None:
    # verdicts whose order was not recorded cannot exist in the older schema
    op.execute("DELETE FROM pairwise_judgment WHERE position = 'na'")
    with op.batch_alter_table('pairwise_judgment', schema=None) as batch_op:
        batch_op.drop_constraint('position', type_='check')
        batch_op.create_check_constraint('position', "position IN ('ab','ba')")
        batch_op.drop_constraint('baseline_side', type_='check')
        batch_op.drop_constraint('preference', type_='check')
        batch_op.drop_column('source')
        batch_op.drop_column('baseline_side')
        batch_op.drop_column('preference')
