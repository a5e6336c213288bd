"""One exception hierarchy for judgecal.

The CLI turns every :class:`JudgecalError` into a one-line message on stderr and a non-zero
exit status (2 for usage/input errors, 1 for failures found at run time). Library callers can
catch :class:`JudgecalError` to handle them all.
"""

from __future__ import annotations


class JudgecalError(Exception):
    """Base class of every error judgecal raises on purpose. ``exit_code`` is the CLI's status."""

    exit_code = 2


def raised_by_interrupt(exc: BaseException) -> bool:
    """True when ``exc`` was raised while a Ctrl-C (KeyboardInterrupt) was being handled: a
    database driver interrupted mid-statement fails its cleanup (SQLAlchemy's "Can't reconnect
    until invalid transaction is rolled back"), which hides the interrupt behind an error that
    is none of the user's doing."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


class UsageError(JudgecalError):
    """A bad option value or combination of options."""


class ChoiceError(UsageError):
    """A command needs a choice the data leaves open (several judges, task families or
    baselines fit what was given). ``options``: [{"label": one line saying what tells the
    choice apart (counts, identity), "params": {option: value} that selects it}] in content
    order; the CLI prints the message (which lists them), the web view a page of links."""

    def __init__(self, message: str, options: list[dict]):
        self.options = list(options)
        super().__init__(message)


class InputError(JudgecalError):
    """A bad input file or record. The message names the file and line (``FILE:LINE: reason``)
    or the field."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.source = source
        self.line = line
        if source is not None:
            loc = f"{source}:{line}" if line is not None else str(source)
            message = f"{loc}: {message}"
        super().__init__(message)

    def __reduce__(self):
        # pickled as raised (a parsing process sends it to the importing one): the message
        # already names FILE:LINE, the attributes are kept beside it
        return (_input_error, (str(self), self.source, self.line))


def _input_error(message: str, source: str | None, line: int | None) -> InputError:
    exc = InputError(message)
    exc.source, exc.line = source, line
    return exc


class DatabaseError(JudgecalError):
    """The database cannot be reached, is behind its migrations, or refused a write."""


class ReadOnlyError(JudgecalError):
    """A view would write (e.g. token lengths not stored yet) to a database opened read-only
    (``judgecal serve``); the message names the command that writes it. The web view answers
    403 with it."""

    exit_code = 1


class SchemaBehindError(DatabaseError):
    """The database schema is older than this judgecal: run ``judgecal db upgrade``."""


class DataLossError(UsageError):
    """A migration step would delete rows or drop values, and the caller did not say yes."""

    def __init__(self, revision: str, losses: list):
        self.revision, self.losses = revision, list(losses)
        what = "; ".join(c.line() for c in self.losses)
        super().__init__(f"downgrade to {revision} would lose data: {what}; nothing was changed: give --yes to "
                         "downgrade anyway (back up the database first; docs/database.md)")


class Interrupted(JudgecalError):
    """Ctrl-C (or SIGTERM) stopped the work before it committed anything; the message says
    what state it left (e.g. a migration rolled back, the database's revision). The CLI prints
    the message as it is (no ``error:`` prefix: the user asked for the stop) and exits 130."""

    exit_code = 130


class NotFoundError(JudgecalError):
    """A named thing (task family, judge, run, calibration) does not exist."""


class ModelError(JudgecalError):
    """The local model cannot be obtained or loaded (missing extra, missing folder)."""


class EndpointError(JudgecalError):
    """An OpenAI-compatible endpoint answered in a way that cannot be used."""

    exit_code = 1


class WorkerError(JudgecalError):
    """A helper process (an import's parser) ended without an answer: killed from outside,
    or out of memory."""

    exit_code = 1


class FitError(JudgecalError):
    """A calibration cannot be fitted (too few labels, degenerate data)."""

    exit_code = 1
