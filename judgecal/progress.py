"""Progress of the CLI's long steps (fit, report, leaderboard, check: anything that can take
more than 2 s): the view functions call ``step("what now")`` at each phase; the CLI shows it as
a live spinner line on stderr with the elapsed time, only when stderr is a terminal (pipes,
logs and JSON output stay clean)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.text import Text

Step = Callable[[str], None]


def no_step(_: str) -> None:
    """The step function of a caller that shows no progress."""


@contextmanager
def steps(console: Console, label: str) -> Iterator[Step]:
    """A ``step(message)`` function for the duration of the block: on a terminal, a spinner
    line ``label: message (N s)`` on ``console`` that disappears when the block ends; elsewhere a
    function that does nothing."""
    if not console.is_terminal:
        yield no_step
        return
    t0 = time.monotonic()
    with console.status(Text(f"{label}…")) as status:
        def step(message: str) -> None:
            status.update(Text(f"{label}: {message} ({time.monotonic() - t0:.0f} s)"))

        yield step
