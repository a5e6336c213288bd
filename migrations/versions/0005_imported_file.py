"""imported files: the SHA-256 of every imported file's content

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 09:50:00

Adds ``imported_file`` (importer, --task-family given or '', SHA-256 of the content, the
absolute path it was first imported from, its size, when): an import of a content already
imported under another name or through a symbolic link is counted as "already imported as
<first path>" instead of stored twice (docs/data-formats.md). Files imported before this
migration have no row: they are recognised from their next import on.

Downgrade: drops the table and with it every file hash (counted and refused without --yes:
judgecal.db.migration_losses); the imported records themselves are kept.
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'imported_file',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('importer', sa.String(length=40), nullable=False),
        sa.Column('family_option', sa.String(length=200), nullable=False),
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('path', sa.Text(), nullable=False),
        sa.Column('n_bytes', sa.BigInteger(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_imported_file')),
        sa.UniqueConstraint('importer', 'family_option', 'sha256',
                            name=op.f('uq_imported_file_importer_family_option_sha256')),
    )


def downgrade() -> None:
    # what this drops (every file hash) is counted first: judgecal.db.migration_losses LOSSES["0005"]
    op.drop_table('imported_file')
