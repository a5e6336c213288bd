"""rating content key: the ratings list's content order as one stored, indexed column

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 03:50:00

Adds ``rating.content_key`` (judgecal.db.contentkey: family name, item prompt SHA-256, model,
answer SHA-256, judge key and sample index in one text that sorts as the six-tuple by code
point; PostgreSQL: ``COLLATE "C"``), a B-tree index on it, and the trigger that fills it for
every rating written by any client (PostgreSQL: a BEFORE INSERT OR UPDATE row trigger sets
NEW.content_key; SQLite: AFTER INSERT / AFTER UPDATE row triggers write it back), then fills it
for every stored rating in one UPDATE. judgecal never changes a family's name, an answer's model,
a digest or a judge key once written, but another client may (plain SQL): an update of one of
those columns computes the keys of the ratings that hold it again (one more trigger per table).
PostgreSQL's functions keep the search_path of the upgrade (``SET search_path FROM CURRENT``), so
a client with another search_path writes the same keys (and migration 0006's generation function
gets the same setting: it failed for such a client).

The SQL below is this revision's frozen copy of the key's definition (judgecal.db.contentkey
holds it in Python; tests hold the two equal): a change of the definition is a new migration,
never an edit of this one.

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


#: (table, the columns a key is made of, the ratings whose key holds that row's): an update of one of those
#: columns computes those ratings' keys again
_MOVES = (
    ('task_family', 'name', "response_id IN (SELECT s.id FROM response s JOIN item i ON i.id = s.item_id "
                            "WHERE i.task_family_id = {row}.id)"),
    ('item', 'task_family_id, prompt_sha256', "response_id IN (SELECT s.id FROM response s WHERE s.item_id = {row}.id)"),
    ('response', 'item_id, model, text_sha256', "response_id = {row}.id"),
    ('judge', 'judge_key', "judge_id = {row}.id"),
)

_JOINS = ("response s JOIN item i ON i.id = s.item_id JOIN task_family f ON f.id = i.task_family_id "
          "CROSS JOIN judge j")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    column = sa.Text().with_variant(sa.Text(collation='C'), 'postgresql')
    op.add_column('rating', sa.Column('content_key', column, nullable=True))
    if dialect == 'postgresql':
        op.execute(f"UPDATE rating r SET content_key = {_key(dialect, 'r.sample_index')} FROM {_JOINS} "
                   "WHERE s.id = r.response_id AND j.id = r.judge_id")
        op.execute("CREATE FUNCTION jc_rating_content_key() RETURNS trigger LANGUAGE plpgsql "
                   "SET search_path FROM CURRENT AS $$ BEGIN "
                   f"SELECT {_key(dialect, 'NEW.sample_index')} INTO NEW.content_key FROM {_JOINS} "
                   "WHERE s.id = NEW.response_id AND j.id = NEW.judge_id; RETURN NEW; END $$")
        op.execute("CREATE TRIGGER jc_rating_content_key BEFORE INSERT OR UPDATE OF response_id, judge_id, "
                   "sample_index ON rating FOR EACH ROW EXECUTE FUNCTION jc_rating_content_key()")
        # a part of the key changed on its own row (a family renamed by plain SQL, say): its ratings' keys are
        # computed again (the no-op assignment fires the trigger above)
        # migration 0006's generation trigger likewise (it failed for a client with another search_path)
        op.execute("ALTER FUNCTION jc_content_changed() SET search_path FROM CURRENT")
        for table, columns, ratings in _MOVES:
            op.execute(f"CREATE FUNCTION jc_rekey_{table}() RETURNS trigger LANGUAGE plpgsql "
                       "SET search_path FROM CURRENT AS $$ BEGIN "
                       f"UPDATE rating SET response_id = response_id WHERE {ratings.format(row='NEW')}; "
                       "RETURN NULL; END $$")
            op.execute(f"CREATE TRIGGER jc_rekey_{table} AFTER UPDATE OF {columns} ON {table} FOR EACH ROW "
                       f"EXECUTE FUNCTION jc_rekey_{table}()")
    else:
        fill = (f"UPDATE rating SET content_key = (SELECT {_key(dialect, 'NEW.sample_index')} FROM {_JOINS} "
                "WHERE s.id = NEW.response_id AND j.id = NEW.judge_id) WHERE id = NEW.id;")
        op.execute(f"UPDATE rating SET content_key = (SELECT {_key(dialect, 'rating.sample_index')} FROM {_JOINS} "
                   "WHERE s.id = rating.response_id AND j.id = rating.judge_id)")
        op.execute(f"CREATE TRIGGER jc_rating_content_key_insert AFTER INSERT ON rating BEGIN {fill} END")
        op.execute("CREATE TRIGGER jc_rating_content_key_update AFTER UPDATE OF response_id, judge_id, sample_index "
                   f"ON rating BEGIN {fill} END")
        for table, columns, ratings in _MOVES:
            op.execute(f"CREATE TRIGGER jc_rekey_{table} AFTER UPDATE OF {columns} ON {table} BEGIN "
                       f"UPDATE rating SET response_id = response_id WHERE {ratings.format(row='NEW')}; END")
    op.create_index(op.f('ix_rating_content_key'), 'rating', ['content_key'], unique=False)


def downgrade() -> None:
    # nothing lost (judgecal.db.migration_losses LOSSES["0008"] is empty): the next upgrade computes it again
    op.drop_index(op.f('ix_rating_content_key'), table_name='rating')
    if op.get_bind().dialect.name == 'postgresql':
        for table, _, _ in _MOVES:
            op.execute(f"DROP TRIGGER IF EXISTS jc_rekey_{table} ON {table}")
            op.execute(f"DROP FUNCTION IF EXISTS jc_rekey_{table}()")
        op.execute("DROP TRIGGER IF EXISTS jc_rating_content_key ON rating")
        op.execute("DROP FUNCTION IF EXISTS jc_rating_content_key()")
        op.execute("ALTER FUNCTION jc_content_changed() RESET search_path")
    else:
        for table, _, _ in _MOVES:
            op.execute(f"DROP TRIGGER IF EXISTS jc_rekey_{table}")
        op.execute("DROP TRIGGER IF EXISTS jc_rating_content_key_insert")
        op.execute("DROP TRIGGER IF EXISTS jc_rating_content_key_update")
    # a plain ALTER TABLE on both dialects (SQLite 3.35+): batch mode would copy the table and lose its triggers
    op.execute("ALTER TABLE rating DROP COLUMN content_key")
