"""Parse the files of one import in worker processes while the caller writes.

An import of many large files (AlpacaEval's ``results/`` folder: 26 annotations.json files,
95 MB) spends about as long parsing as writing. :func:`map_files` parses the files in forked
worker processes and hands the results back in the order the files were listed, so the
single database transaction writes file k while file k+1 is parsed. Errors raised while parsing a file are raised to the caller at that file's turn, as if
the files were parsed one after the other.

Workers are used only where they pay and are safe: the ``fork`` start method (POSIX; a worker
starts in milliseconds with the parent's modules loaded), no other thread running in this
process (a forked child inherits a copy of locks other threads may hold), at least two files
and :data:`MIN_PARALLEL_BYTES` bytes in all. Otherwise the files are parsed here, one by one.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
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
    return max(1, min(_cpus() - 1, MAX_WORKERS, len(files) - 1))


def _claim(counter, total: int) -> int | None:
    """The index of the next file nobody parses yet (None when all are taken)."""
    with counter.get_lock():
        k = counter.value
        if k >= total:
            return None
        counter.value = k + 1
        return k


def _worker(conn, counter, fn: Callable[..., Any], files: Sequence[Path], args: tuple) -> None:
    # Ctrl-C reaches the whole process group: the parent alone handles it (it stops the workers)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.disable()  # a short-lived parser whose objects hold no cycles (records.bulk)
    # results are pickled here and written to the pipe by a sender thread (the write blocks
    # until the parent reads; the GIL is free meanwhile), so the next file is parsed at once
    outbox: queue.Queue = queue.Queue(maxsize=2)

    def send() -> None:
        while (data := outbox.get()) is not None:
            try:
                conn.send_bytes(data)
            except OSError:  # the parent stopped reading (done, failed or gone)
                return

    sender = threading.Thread(target=send, name="judgecal-parse-sender", daemon=True)
    sender.start()

    def post(item: bytes | None) -> bool:
        while sender.is_alive():
            try:
                outbox.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    try:
        while (k := _claim(counter, len(files))) is not None:
            try:
                result, failed = (k, "ok", fn(files[k], *args)), False
            except Exception as exc:  # raised again in the parent, at this file's turn
                result, failed = (k, "error", exc), True
            try:
                data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # an exception that does not pickle: its message does
                data, failed = pickle.dumps((k, "error", RuntimeError(f"{files[k]}: {exc}"))), True
            if not post(data) or failed:
                break
    finally:
        post(None)
        sender.join()
        conn.close()


def map_files(fn: Callable[..., T], files: Sequence[Path], *args: Any, workers: int | None = None) -> Iterator[T]:
    """``fn(file, *args)`` for every file, in the order of ``files``, computed by up to
    ``workers`` forked processes and by this process (None: :func:`auto_workers`; 0: in this
    process alone, lazily).

    Files are handed out in order from one shared counter: each worker takes the next file,
    parses it, sends the result (pickled) through its own pipe and takes another without
    waiting for this process to read (at most two results wait in a worker). This process
    yields the results in the files' order; whenever the one it needs next has not arrived,
    it parses the next file nobody has taken itself instead of waiting (so the first file,
    and a share of the others where writing is faster than parsing). No helper thread runs in
    this process to compete with the caller for the GIL. An exception ``fn`` raises is raised
    here at that file's turn (the first bad file in the listed order), and the workers are
    then stopped; so are they when the caller stops iterating. ``fn`` must be a module-level
    function; its arguments and result pickle. Raises RuntimeError when a worker dies without
    an answer (killed from outside)."""
    n = auto_workers(files) if workers is None else min(workers, len(files) - 1)
    if n <= 0 or "fork" not in multiprocessing.get_all_start_methods():
        for f in files:
            yield fn(f, *args)
        return
    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("q", 0)
    procs, conns = [], []
    try:
        for j in range(n):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(send, counter, fn, list(files), args), daemon=True,
                               name=f"judgecal-parse-{j}")
            proc.start()
            send.close()
            procs.append(proc)
            conns.append(recv)
        ready: dict[int, tuple[str, Any]] = {}
        alive = list(conns)

        def receive(timeout: float | None) -> None:
            for conn in wait(alive, timeout):
                try:
                    k, status, value = pickle.loads(conn.recv_bytes())
                except EOFError:  # this worker is done (or died: see below)
                    alive.remove(conn)
                    continue
                ready[k] = (status, value)

        for k, f in enumerate(files):
            while k not in ready:
                receive(0)
                if k in ready:
                    break
                mine = _claim(counter, len(files))
                if mine is not None:  # nothing has arrived: parse the next free file here
                    try:
                        ready[mine] = ("ok", fn(files[mine], *args))
                    except Exception as exc:
                        ready[mine] = ("error", exc)
                elif alive:
                    receive(None)
                else:
                    raise RuntimeError(f"{f}: the process parsing this file ended without an answer "
                                       f"(exit status {', '.join(str(p.exitcode) for p in procs)})")
            status, value = ready.pop(k)
            if status == "error":
                raise value
            yield value
    finally:
        for conn in conns:
            conn.close()
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
