"""File parsers for ``judgecal import``: each turns a file into an :class:`ImportBatch` of
plain records (no database access); :mod:`judgecal.db.ingest` writes a batch in one
transaction."""
