"""derived results: what the pages cannot compute in 300 ms, computed when the data is written

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05 07:10:00

Adds ``derived_result`` (a view function's result, keyed by its parameters, judgecal's code and
the database's content generation; judgecal.db.derived), ``content_state`` (one row: the
content generation on SQLite; on PostgreSQL the part of it compacted from ``content_change``) and
``content_change`` (one row per writing statement on PostgreSQL), and the triggers that move the generation on every insert,
update and delete of a content table, by any client (SQLite: a row trigger adds 1 to
``content_state.generation``; PostgreSQL: a statement trigger appends a row to
``content_change``, which takes no lock that writers could wait on). A stored result is only
read back at the generation it was computed at, so it can never outlive a change of the data.

Downgrade: drops the triggers and the three tables (the stored results are recomputed by
``judgecal db refresh`` after an upgrade; nothing written by the user is lost).
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

#: the tables whose rows the derived results are computed from (every table a page reads)
CONTENT_TABLES = ('task_family', 'item', 'response', 'token_length', 'judge', 'rating', 'pairwise_judgment',
                  'expert_label', 'verbosity_pair', 'calibration', 'mc_run', 'mc_item_result')


def upgrade() -> None:
    op.create_table(
        'derived_result',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=50), nullable=False),
        sa.Column('key', sa.String(length=64), nullable=False),
        sa.Column('generation', sa.String(length=100), nullable=False),
        sa.Column('value', sa.Text(), nullable=False),
        sa.Column('judgecal_version', sa.String(length=50), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_derived_result')),
        sa.UniqueConstraint('key', name=op.f('uq_derived_result_key')),
    )
    op.create_table(
        'content_state',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_content_state')),
    )
    op.create_table(
        'content_change',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_content_change')),
    )
    op.execute("INSERT INTO content_state (id, generation) VALUES (1, 0)")
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("CREATE FUNCTION jc_content_changed() RETURNS trigger LANGUAGE plpgsql AS "
                   "$$ BEGIN INSERT INTO content_change DEFAULT VALUES; RETURN NULL; END $$")
        for table in CONTENT_TABLES:
            op.execute(f"CREATE TRIGGER jc_gen_{table} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
                       "FOR EACH STATEMENT EXECUTE FUNCTION jc_content_changed()")
    else:
        for table in CONTENT_TABLES:
            for event in ('insert', 'update', 'delete'):
                op.execute(f"CREATE TRIGGER jc_gen_{table}_{event} AFTER {event.upper()} ON {table} "
                           "BEGIN UPDATE content_state SET generation = generation + 1 WHERE id = 1; END")


def downgrade() -> None:
    # what this drops (the stored results, recomputed by `judgecal db refresh`): judgecal.db.migration_losses LOSSES["0006"]
    if op.get_bind().dialect.name == 'postgresql':
        for table in CONTENT_TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS jc_gen_{table} ON {table}")
        op.execute("DROP FUNCTION IF EXISTS jc_content_changed()")
    else:
        for table in CONTENT_TABLES:
            for event in ('insert', 'update', 'delete'):
                op.execute(f"DROP TRIGGER IF EXISTS jc_gen_{table}_{event}")
    op.drop_table('content_change')
    op.drop_table('content_state')
    op.drop_table('derived_result')
