"""The ``judgecal`` console script's entry point.

It imports nothing heavy itself, so a Ctrl-C while the command line's modules load (click,
rich, sqlalchemy: a few hundred milliseconds) is one line, ``aborted``, exit 130, never a
traceback; and it leaves Ctrl-C ignored on the way out (:func:`judgecal.cli.main`:
``sigint_after``), so that one during the interpreter's shutdown, after the outcome was
reported, does not end the process by SIGINT."""

import signal
import sys


def _aborted() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sys.stderr.write("aborted\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(130)


def main() -> None:
    try:
        from judgecal.cli import main as cli_main
    except KeyboardInterrupt:
        _aborted()
    try:
        cli_main(sigint_after=signal.SIG_IGN)
    except KeyboardInterrupt:  # before cli.main's own handling was in place
        _aborted()


if __name__ == "__main__":
    main()
