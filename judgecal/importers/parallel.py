"""Parse the files of one import in worker processes while the caller writes.

An import of many large files (AlpacaEval's ``results/`` folder: 26 annotations.json files,
95 MB) spends about as long parsing as writing. :func:`map_files` parses the files in forked
worker processes, a few files ahead of the caller, and hands the results back in the order
the files were listed, so the single database transaction writes file k while file k+1 is
parsed. Errors raised while parsing a file are raised to the caller at that file's turn, as if
the files were parsed one after the other.

Workers are used only where they pay and are safe: the ``fork`` start method (POSIX; a worker
starts in milliseconds with the parent's modules loaded), no other thread running in this
process (a forked child inherits a copy of locks other threads may hold), at least two files
and :data:`MIN_PARALLEL_BYTES` bytes in all. Otherwise the files are parsed here, one by one.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MIN_PARALLEL_BYTES = 8 * 1024**2  # below this, forking costs more than it saves
MAX_WORKERS = 4  # one transaction writes: more parsers than this only wait


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def auto_workers(files: Sequence[Path]) -> int:
    """Worker processes :func:`map_files` uses for ``files`` (0: parse them in this process):
    one fewer than the CPUs this process may run on, at most :data:`MAX_WORKERS` and one
    per file; 0 without the fork start method, with other threads running, for a single file
    or for less than :data:`MIN_PARALLEL_BYTES` in all."""
    if len(files) < 2 or "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return 0
    try:
        total = sum(os.stat(f).st_size for f in files)
    except OSError:
        return 0  # the parser names the file it cannot read
    if total < MIN_PARALLEL_BYTES:
        return 0
    return max(1, min(_cpus() - 1, MAX_WORKERS, len(files)))


def _quiet_worker() -> None:
    # Ctrl-C reaches the whole process group: the parent alone handles it (it stops the pool)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def map_files(fn: Callable[..., T], files: Sequence[Path], *args: Any, workers: int | None = None) -> Iterator[T]:
    """``fn(file, *args)`` for every file, in the order of ``files``, computed by up to
    ``workers`` forked processes (None: :func:`auto_workers`; 0: in this process, lazily).
    At most ``2 * workers`` results wait unread. An exception ``fn`` raises is raised here at
    that file's turn; the files not yet parsed are then abandoned. ``fn`` must be a
    module-level function; its arguments and result are pickled."""
    n = auto_workers(files) if workers is None else workers
    if n <= 0 or len(files) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        for f in files:
            yield fn(f, *args)
        return
    pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("fork"), initializer=_quiet_worker)
    try:
        pending: deque = deque()
        queue = iter(files)
        for f in queue:
            pending.append(pool.submit(fn, f, *args))
            if len(pending) >= 2 * n:
                break
        while pending:
            result = pending.popleft().result()
            for f in queue:
                pending.append(pool.submit(fn, f, *args))
                break
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
