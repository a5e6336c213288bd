"""What each migration's downgrade deletes or transforms, counted before it runs.

A downgrade that would delete rows, or drop values a later ``db upgrade`` cannot bring back,
is refused unless the caller says yes (``judgecal db downgrade REV --yes``); the refusal and
the confirmation both say how many rows and which. Every revision of the tree has an entry
here (a test keeps it so): a new migration's author writes down what its downgrade loses
(an empty list when it loses nothing), next to the migration rather than inside it.

Each entry is a list of :class:`Loss`: a count query, run on the schema as it is before the
downgrade (every column it names still exists there), and what the counted rows lose."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class Loss:
    """``sql`` counts the rows that lose something; ``what`` says what (after the count);
    ``deletes``: the table whose counted rows are deleted (not only changed), so that undoing
    the initial revision afterwards counts only the rows still left there."""

    sql: str
    what: str
    deletes: str | None = None


# the preference migration 0002's upgrade writes back from a verdict (a = 1, b = 0, tie = 0.5)
_REFILLED = ("status = 'ok' AND verdict IS NOT NULL AND preference = CASE verdict WHEN 'a' THEN 1.0 "
             "WHEN 'b' THEN 0.0 WHEN 'tie' THEN 0.5 END")

LOSSES: dict[str, list[Loss]] = {
    # 0008 (rating.content_key, its index and triggers): computed from the rows, computed again by the next upgrade
    "0008": [],
    # 0007 (response.md_headers, md_list_ordered, md_list_unordered, md_bold): computed from the texts,
    # computed again by the next upgrade
    "0007": [],
    # 0006 (derived_result, content_state, content_change and the generation triggers): only results
    # computed from the data are dropped (`judgecal db refresh` computes them again after an upgrade)
    "0006": [],
    # 0005 (imported_file): the table of imported files' content hashes is dropped
    "0005": [
        Loss("SELECT COUNT(*) FROM imported_file",
             "imported files' content hashes are deleted (imported_file dropped; the imported records are kept, "
             "but a later import of one of those files' content under another name or through a symbolic link "
             "is no longer recognised as already imported)", deletes="imported_file"),
    ],
    # 0004 (rating.distribution, pairwise_judgment.distribution): the columns are dropped
    "0004": [
        Loss("SELECT COUNT(*) FROM rating WHERE distribution IS NOT NULL AND CAST(distribution AS TEXT) <> 'null'",
             "ratings lose their judgment distribution (rating.distribution dropped; expected_score is kept)"),
        Loss("SELECT COUNT(*) FROM pairwise_judgment WHERE distribution IS NOT NULL "
             "AND CAST(distribution AS TEXT) <> 'null'",
             "pairwise verdicts lose their judgment distribution (pairwise_judgment.distribution dropped; "
             "the soft preference is kept)"),
    ],
    # 0003 (mc_item_result.task, doc_id, golds): the columns are dropped
    "0003": [
        Loss("SELECT COUNT(*) FROM mc_item_result WHERE task IS NOT NULL OR doc_id IS NOT NULL "
             "OR (golds IS NOT NULL AND CAST(golds AS TEXT) <> 'null')",
             "multiple-choice item results lose their lm-eval task, doc_id and golds "
             "(mc_item_result.task, doc_id, golds dropped)"),
    ],
    # 0002 (pairwise verdicts: soft preference, baseline side, source, position 'na')
    "0002": [
        Loss("SELECT COUNT(*) FROM pairwise_judgment WHERE position = 'na'",
             "pairwise verdicts without a recorded order (position 'na': imported AlpacaEval, LLMBar and "
             "generic verdicts) are deleted", deletes="pairwise_judgment"),
        Loss(f"SELECT COUNT(*) FROM pairwise_judgment WHERE position <> 'na' AND preference IS NOT NULL "
             f"AND NOT ({_REFILLED})",
             "pairwise verdicts lose a soft preference that `db upgrade` cannot refill from the verdict"),
        Loss("SELECT COUNT(*) FROM pairwise_judgment WHERE position <> 'na' AND baseline_side IS NOT NULL",
             "pairwise verdicts lose their baseline side (win-rate comparisons no longer find them)"),
        Loss("SELECT COUNT(*) FROM pairwise_judgment WHERE position <> 'na' AND source IS NOT NULL",
             "pairwise verdicts lose the name of the file they were imported from"),
    ],
    # 0001 (initial schema): `downgrade base` drops every table; counted table by table below
    "0001": [],
}

#: the revision whose downgrade drops every table
INITIAL = "0001"
#: tables of results computed from the data and of its content generation (0006): nothing a user
#: wrote is lost with them (`judgecal db refresh` computes them again), so no downgrade counts them
DERIVED_TABLES = {"derived_result", "content_state", "content_change"}


@dataclass(frozen=True)
class Counted:
    """``n`` rows of the step undoing ``revision`` lose ``what``."""

    revision: str
    n: int
    what: str

    def line(self) -> str:
        return f"{self.n} {self.what} (undoing {self.revision})"


def count(conn: Connection, revisions: list[str]) -> list[Counted]:
    """What undoing ``revisions`` (newest first, as a downgrade runs them) loses, as counted
    now; only the losses with rows. Undoing the initial revision counts every table's rows."""
    found: list[Counted] = []
    deleted: dict[str, int] = {}  # rows a later revision's undoing deletes first, by table
    for rev in revisions:
        if rev not in LOSSES:  # pragma: no cover - tests/test_migration_roundtrip.py keeps the registry complete
            raise KeyError(f"migration {rev} has no entry in judgecal.db.migration_losses.LOSSES")
        for loss in LOSSES[rev]:
            n = int(conn.execute(text(loss.sql)).scalar_one())
            if n:
                found.append(Counted(rev, n, loss.what))
                if loss.deletes:
                    deleted[loss.deletes] = deleted.get(loss.deletes, 0) + n
        if rev == INITIAL:
            # the rows still there when the initial revision is undone: each row is counted once
            # (an 'na' verdict deleted undoing 0002 is not deleted again with its table; the
            # imported_file table is dropped undoing 0005, not 0001)
            for table in sorted(set(inspect(conn).get_table_names()) - {"alembic_version"} - DERIVED_TABLES):
                n = int(conn.execute(text(f'SELECT COUNT(*) FROM "{table}"')).scalar_one()) - deleted.get(table, 0)
                if n > 0:
                    found.append(Counted(rev, n, f"rows of table {table} are deleted (the table is dropped)"))
    return found
