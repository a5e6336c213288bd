"""Parse the files of one import in worker processes while the caller writes.

An import of many large files (AlpacaEval's ``results/`` folder: 26 annotations.json files,
95 MB) spends about as long parsing as writing. :func:`map_files` parses the files in forked
worker processes and hands the results back in the order the files were listed, so the
single database transaction writes file k while file k+1 is parsed. Errors raised while
parsing a file are raised to the caller at that file's turn, as if the files were parsed one
after the other.

Workers are used only where they pay and are safe: the ``fork`` start method (POSIX; a worker
starts in milliseconds with the parent's modules loaded), no other thread running in this
process (a forked child inherits a copy of locks other threads may hold), at least two files
and :data:`MIN_PARALLEL_BYTES` bytes in all. Otherwise the files are parsed here, one by one,
and :func:`map_files` says so (its ``stats``: the reason and the count), as it counts the files
this process parses while workers run: any file may be parsed in the calling process.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import queue
import signal
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, TypeVar

from judgecal.errors import UsageError, WorkerError

try:
    import fcntl
except ImportError:  # not POSIX: no fork either, files are parsed in this process
    fcntl = None

T = TypeVar("T")

MIN_PARALLEL_BYTES = 8 * 1024**2  # below this, forking costs more than it saves
MAX_WORKERS = 4  # one transaction writes: more parsers than this only wait
# how long the caller waits for the next file's result before parsing a free file itself:
# a worker is usually a few milliseconds from delivering it, and a file the caller parses
# delays its writing by a whole parse
PATIENCE_S = 0.010
LOOKAHEAD = 3  # results of one worker held unread by the caller, at most (memory: a few files per worker)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def no_workers_reason(files: Sequence[Path]) -> str | None:
    """Why :func:`auto_workers` parses ``files`` in this process (one line), None when it
    starts workers: fewer than two files, no ``fork`` start method, other threads running in
    this process (a forked child would inherit a copy of locks they may hold), a file that
    cannot be read (its parser names it), or less than :data:`MIN_PARALLEL_BYTES` in all."""
    if len(files) < 2:
        return "a single file" if files else "no file"
    if "fork" not in multiprocessing.get_all_start_methods():
        return "no fork start method here (POSIX only)"
    threads = threading.active_count()
    if threads > 1:
        return (f"{threads - 1} other thread(s) run in this process: a forked worker could inherit a lock one of "
                "them holds")
    try:
        total = sum(os.stat(f).st_size for f in files)
    except OSError:
        return "a file cannot be read (its parser names it)"
    if total < MIN_PARALLEL_BYTES:
        return f"{total / 1024**2:.1f} MB in all: workers pay from {MIN_PARALLEL_BYTES // 1024**2} MB"
    return None


def auto_workers(files: Sequence[Path]) -> int:
    """Worker processes :func:`map_files` uses for ``files`` (0: parse them in this process,
    for the reason :func:`no_workers_reason` gives): one fewer than the CPUs this process may
    run on, at most :data:`MAX_WORKERS` and one per file; 0 without the fork start method,
    with other threads running, for a single file or for less than
    :data:`MIN_PARALLEL_BYTES` in all."""
    if no_workers_reason(files) is not None:
        return 0
    return max(1, min(_cpus() - 1, MAX_WORKERS, len(files) - 1))


def _claim(counter, total: int, owners=None, me: int = -1) -> int | None:
    """The index of the next file nobody parses yet, recorded in ``owners`` as taken by ``me``
    (None when all are taken, or when the counter's lock stays taken: a process killed while
    holding it must not hang the others)."""
    lock = counter.get_lock()
    if not lock.acquire(timeout=5.0):
        return None
    try:
        k = counter.value
        if k >= total:
            return None
        if owners is not None:
            owners[k] = me
        counter.value = k + 1
        return k
    finally:
        lock.release()


def _owner(counter, owners, k: int) -> int | None:
    """Who took file ``k`` (a worker's number; -1: nobody yet; None: the lock stays taken)."""
    lock = counter.get_lock()
    if not lock.acquire(timeout=5.0):
        return None
    try:
        return owners[k]
    finally:
        lock.release()


_PR_SET_PDEATHSIG = 1
_libc: Any = None


def _load_libc() -> None:
    """Load the C library's prctl here, before forking (Linux; a worker then asks to be killed
    when this process dies without the cost of importing ctypes itself)."""
    global _libc
    if _libc is None and os.uname().sysname == "Linux":
        try:
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.prctl  # noqa: B018 - AttributeError without it
        except (OSError, AttributeError, ImportError):
            _libc = False


def _die_with_parent(parent: int) -> None:
    """Have this worker killed when the process that forked it dies (Linux: PR_SET_PDEATHSIG;
    elsewhere the worker checks its parent between files and while it waits to send)."""
    if _libc:
        try:
            _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except Exception:  # noqa: BLE001 - the getppid checks remain
            pass
    if os.getppid() != parent:  # it died before the request was in place
        os._exit(1)


def _how_it_ended(proc) -> str:
    proc.join(timeout=2.0)
    code = proc.exitcode
    if code is None:
        return "it closed its pipe and is still running"
    if code < 0:
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        return f"it was killed by signal {-code}{name}: killed from outside or out of memory"
    return f"it exited with status {code}"


_HEADER = struct.Struct("<Q")  # a message's length in bytes, before it


def _pipe() -> tuple[int, int]:
    """A pipe (read end, write end) that holds up to 1 MiB where the system allows it (Linux:
    a result of a few MB then crosses in a few writes rather than one per 64 KiB)."""
    r, w = os.pipe()
    if fcntl is not None and hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass  # over the system's limit for this user: the default size
    return r, w


def _send(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_into(fd: int, view: memoryview) -> int:
    got = 0
    while got < len(view):
        n = os.readv(fd, [view[got:]])
        if n == 0:
            break
        got += n
    return got


def _receive(fd: int) -> bytes | None:
    """One message from a worker's pipe, read straight into its buffer (None at the end)."""
    header = bytearray(_HEADER.size)
    if _read_into(fd, memoryview(header)) < len(header):
        return None
    data = bytearray(_HEADER.unpack(header)[0])
    return data if _read_into(fd, memoryview(data)) == len(data) else None


def _worker(me: int, wfd: int, inherited: Sequence[int], parent: int, counter, owners,
            fn: Callable[..., Any], files: Sequence[Path], args: tuple) -> None:
    # Ctrl-C reaches the whole process group: the parent alone handles it (it stops the workers);
    # SIGTERM ends a worker at once, whatever handler the parent has
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent)
    for fd in inherited:  # the read ends of the pipes forked so far: only the parent reads
        try:  # (a worker holding them would never see its own pipe's reader gone)
            os.close(fd)
        except OSError:
            pass
    gc.disable()  # a short-lived parser whose objects hold no cycles (records.bulk)
    # results are pickled here and written to the pipe by a sender thread (the write blocks
    # until the parent reads; the GIL is free meanwhile), so the next file is parsed at once
    outbox: queue.Queue = queue.Queue(maxsize=2)

    def send() -> None:
        while (data := outbox.get()) is not None:
            try:
                _send(wfd, data)
            except OSError:  # the parent stopped reading (done, failed or gone)
                return

    sender = threading.Thread(target=send, name="judgecal-parse-sender", daemon=True)
    sender.start()

    def post(item: bytes | None) -> bool:
        while sender.is_alive() and os.getppid() == parent:
            try:
                outbox.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    try:
        while os.getppid() == parent and (k := _claim(counter, len(files), owners, me)) is not None:
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
        if post(None):
            sender.join()
        os.close(wfd)


def map_files(fn: Callable[..., T], files: Sequence[Path], *args: Any, workers: int | None = None,
              stats: dict | None = None) -> Iterator[T]:
    """``fn(file, *args)`` for every file, in the order of ``files``, computed by up to
    ``workers`` forked processes and by this process (None: :func:`auto_workers`; 0: in this
    process alone, lazily).

    Files are handed out in order from one shared counter, which records who took each one:
    each worker takes the next file,
    parses it, sends the result (pickled) through its own pipe and takes another without
    waiting for this process to read (at most two results wait in a worker, and
    :data:`LOOKAHEAD` per worker here). This process yields the results in the files' order;
    when the one it needs next has not come within :data:`PATIENCE_S`, it parses the next
    file nobody has taken itself (so the first file, and a share of the others where
    writing is faster than parsing). No helper thread runs in this process to compete with
    the caller for the GIL. An exception ``fn`` raises is raised
    here at that file's turn (the first bad file in the listed order), and the workers are
    then stopped; so are they when the caller stops iterating, and before the last result is
    yielded. ``fn`` must be a module-level
    function; its arguments and result pickle. Raises WorkerError when the worker that took
    the file needed next ends without its answer (killed from outside).

    The workers die with this process (Linux: PR_SET_PDEATHSIG; elsewhere at their next file
    or write); SIGTERM to this process (where it has no handler of its own) kills and reaps
    them first, then ends this process by SIGTERM as before.

    ``stats`` (a dict, filled as the files are yielded): ``files`` (count), ``workers`` (worker
    processes started), ``in_process`` (files parsed in this process: all of them without
    workers, else those it took while a worker's result was late) and ``reason`` (why no
    worker was started: :func:`no_workers_reason`, ``--workers 0``; None with workers), so
    that an import can say where its files were parsed (nothing silent)."""
    if workers and "fork" not in multiprocessing.get_all_start_methods():
        raise UsageError(f"--workers {workers}: parsing workers need the fork start method (POSIX); "
                         "leave the option out or give 0 to parse in this process")
    if workers is None:
        reason = no_workers_reason(files)
        n = 0 if reason is not None else auto_workers(files)
    else:
        n = min(workers, len(files) - 1)
        reason = None if n > 0 else "--workers 0" if workers == 0 else "a single file" if files else "no file"
    if stats is None:
        stats = {}
    stats.update(files=len(files), workers=max(n, 0), in_process=0, reason=reason)
    if n <= 0:
        for f in files:
            stats["in_process"] += 1
            yield fn(f, *args)
        return
    files = list(files)
    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("q", 0)
    owners = ctx.Array("i", [-1] * len(files), lock=False)  # guarded by the counter's lock
    _load_libc()
    procs: list = []
    fds: list[int] = []
    state = {"stopped": False, "sigterm": None}

    def stop(kill: bool = False) -> None:
        # close the pipes (a worker blocked writing gets EPIPE), end the workers, reap them;
        # kill: SIGKILL and reap whatever is left, even while a stop is under way
        if state["stopped"] and not kill:
            return
        state["stopped"] = True
        while fds:
            try:
                os.close(fds.pop())
            except OSError:
                pass
        for proc in procs:
            if proc.exitcode is None:
                proc.kill() if kill else proc.terminate()
        for proc in procs:
            proc.join()
        if state["sigterm"] is not None:
            signal.signal(signal.SIGTERM, state["sigterm"])
            state["sigterm"] = None

    def on_sigterm(signum: int, frame: Any) -> None:
        stop(kill=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # ends this process as SIGTERM did before

    def stop_holding_ctrl_c() -> bool:
        # Ctrl-C during the cleanup is held until the workers are reaped; True if one came
        from judgecal.db.engine import held_interrupts

        held: list = []
        with held_interrupts(held):
            stop()
        return bool(held)

    try:
        parent = os.getpid()
        for j in range(n):
            r, w = _pipe()
            fds.append(r)
            try:
                proc = ctx.Process(target=_worker, args=(j, w, tuple(fds), parent, counter, owners, fn, files, args),
                                   daemon=True, name=f"judgecal-parse-{j}")
                proc.start()
            finally:
                os.close(w)  # the worker holds the write end now: its exit ends the stream
            procs.append(proc)
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            state["sigterm"] = signal.SIG_DFL
            signal.signal(signal.SIGTERM, on_sigterm)
        ready: dict[int, tuple[str, Any, int | None]] = {}  # file index -> (status, value, the fd it came by)
        unread = dict.fromkeys(fds, 0)  # results of each worker waiting in `ready`
        alive = list(fds)

        def receive(timeout: float | None, needed: int | None = None) -> None:
            # a worker with LOOKAHEAD results waiting here is not read: what it holds comes
            # after them; the worker holding the file needed next (`needed`, its pipe) has none
            # waiting (it sends in the order it takes files, and takes them in order), and is
            # always read: its end (EOF) is seen
            for fd in wait([fd for fd in alive if unread[fd] < LOOKAHEAD or fd == needed], timeout):
                data = _receive(fd)
                if data is None:  # this worker is done (or died: the file it held is then lost)
                    alive.remove(fd)
                    continue
                k, status, value = pickle.loads(data)
                ready[k] = (status, value, fd)
                unread[fd] += 1

        for k, f in enumerate(files):
            while k not in ready:
                receive(0 if k == 0 else PATIENCE_S)
                if k in ready:
                    break
                if len(ready) < LOOKAHEAD * (n + 1):
                    mine = _claim(counter, len(files), owners, n)
                    if mine is not None:  # nothing has arrived: parse the next free file here
                        stats["in_process"] += 1
                        try:
                            ready[mine] = ("ok", fn(files[mine], *args), None)
                        except Exception as exc:
                            ready[mine] = ("error", exc, None)
                        continue
                owner = _owner(counter, owners, k)
                if owner is None or not 0 <= owner < n:  # not taken, and nothing can be taken
                    raise WorkerError(f"{f}: no process could take this file (the parsing processes' lock stays "
                                      "taken: one was killed while taking a file): nothing was imported")
                if fds[owner] not in alive:  # its worker ended (EOF on its pipe) without this file's result
                    raise WorkerError(f"{f}: the process parsing this file ended without an answer "
                                      f"({_how_it_ended(procs[owner])}): nothing was imported")
                receive(None, fds[owner])
            status, value, fd = ready.pop(k)
            if fd is not None:
                unread[fd] -= 1
            if status == "error":
                raise value
            if k == len(files) - 1 and stop_holding_ctrl_c():  # every result is in: the workers go now
                raise KeyboardInterrupt  # (the caller may never ask for more: zip() stops at the shorter list)
            yield value
    finally:
        stop_holding_ctrl_c()  # a Ctrl-C here ends an import that is already failing or stopped
