"""rating content key: the ratings list's content order as one stored, indexed column

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 03:50:00

Adds ``rating.content_key`` (judgecal.db.contentkey: family name, item prompt SHA-256, model,
answer SHA-256, judge key and sample index in one text that sorts as the six-tuple by code
point; PostgreSQL: ``COLLATE "C"``), a B-tree index on it, and the trigger that fills it for
every rating written by any client (PostgreSQL: a BEFORE INSERT OR UPDATE row trigger sets
NEW.content_key; SQLite: AFTER INSERT / AFTER UPDATE row triggers write it back), then fills it
for every stored rating in one UPDATE.

The SQL below is this revision's frozen copy of the key's definition (judgecal.db.contentkey
holds it in Python; tests hold the two equal): a change of the definition is a new migration,
never an edit of this one. A family's name, an answer's model, the digests and the judge key
never change once written, so only a rating's own response, judge or sample index moves it.

Downgrade: drops the triggers, the index and the column (nothing is lost: the next upgrade
computes them again).
"""
from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def _key(dialect: str, sample: str) -> str:
    """The key's SQL over the aliases f (task_family), i (item), s (response), j (judge)."""
    if dialect == 'postgresql':
        one, end, esc = "chr(1)", "(chr(1) || chr(1))", "(chr(1) || chr(2))"
        number = f"lpad(({sample}::bigint + 2147483648)::text, 10, '0')"
    else:
        one, end, esc = "char(1)", "(char(1) || char(1))", "(char(1) || char(2))"
        number = f"printf('%010d', {sample} + 2147483648)"
    return (f"replace(f.name, {one}, {esc}) || {end} || i.prompt_sha256 || replace(s.model, {one}, {esc}) || {end}"
            f" || s.text_sha256 || j.judge_key || {number}")


_JOINS = ("response s JOIN item i ON i.id = s.item_id JOIN task_family f ON f.id = i.task_family_id "
          "CROSS JOIN judge j")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    column = sa.Text().with_variant(sa.Text(collation='C'), 'postgresql')
    op.add_column('rating', sa.Column('content_key', column, nullable=True))
    if dialect == 'postgresql':
        op.execute(f"UPDATE rating r SET content_key = {_key(dialect, 'r.sample_index')} FROM {_JOINS} "
                   "WHERE s.id = r.response_id AND j.id = r.judge_id")
        op.execute("CREATE FUNCTION jc_rating_content_key() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                   f"SELECT {_key(dialect, 'NEW.sample_index')} INTO NEW.content_key FROM {_JOINS} "
                   "WHERE s.id = NEW.response_id AND j.id = NEW.judge_id; RETURN NEW; END $$")
        op.execute("CREATE TRIGGER jc_rating_content_key BEFORE INSERT OR UPDATE OF response_id, judge_id, "
                   "sample_index ON rating FOR EACH ROW EXECUTE FUNCTION jc_rating_content_key()")
    else:
        fill = (f"UPDATE rating SET content_key = (SELECT {_key(dialect, 'NEW.sample_index')} FROM {_JOINS} "
                "WHERE s.id = NEW.response_id AND j.id = NEW.judge_id) WHERE id = NEW.id;")
        op.execute(f"UPDATE rating SET content_key = (SELECT {_key(dialect, 'rating.sample_index')} FROM {_JOINS} "
                   "WHERE s.id = rating.response_id AND j.id = rating.judge_id)")
        op.execute(f"CREATE TRIGGER jc_rating_content_key_insert AFTER INSERT ON rating BEGIN {fill} END")
        op.execute("CREATE TRIGGER jc_rating_content_key_update AFTER UPDATE OF response_id, judge_id, sample_index "
                   f"ON rating BEGIN {fill} END")
    op.create_index(op.f('ix_rating_content_key'), 'rating', ['content_key'], unique=False)


def downgrade() -> None:
    # nothing lost (judgecal.db.migration_losses LOSSES["0008"] is empty): the next upgrade computes it again
    op.drop_index(op.f('ix_rating_content_key'), table_name='rating')
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("DROP TRIGGER IF EXISTS jc_rating_content_key ON rating")
        op.execute("DROP FUNCTION IF EXISTS jc_rating_content_key()")
    else:
        op.execute("DROP TRIGGER IF EXISTS jc_rating_content_key_insert")
        op.execute("DROP TRIGGER IF EXISTS jc_rating_content_key_update")
    # a plain ALTER TABLE on both dialects (SQLite 3.35+): batch mode would copy the table and lose its triggers
    op.execute("ALTER TABLE rating DROP COLUMN content_key")
