"""Pages computed ahead of the reader (``judgecal serve``, on by default; ``--no-warm`` turns it off).

On a shared database of a million ratings the score board, the win rates and a big audit take
tens of seconds to compute (docs/performance.md): every figure is read and resampled again
whenever the data changed. The :class:`Warmer` is one background thread that, each time the
database's data version (:func:`judgecal.db.engine.data_version`) moves, computes the pages a
reader is likely to open into the page cache (:mod:`judgecal.web.cache`), one after the other
(memory stays that of one page at a time):

1. the pages readers asked for since a change (queued by the requests themselves);
2. the entry pages and their first choices: the overview, the score board of each judge with
   ratings, the win rates of each stored baseline, the calibration list, the audit and mc lists;
3. the pages read most recently (the cache's own order), up to ``max_recent``.

While a page is being computed again after a change, a request for its HTML gets the copy
computed before the change, served at once with a banner that says when it was computed and
that the data changed since (``x-judgecal-cache: stale``): never silently. ``format=json`` and
``fresh=1`` never get a stale copy: they wait for the page of the current data, as without the
warmer. A page never computed before is computed for the request that asks (or waited for, if
the warmer is computing it)."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from judgecal.web.cache import Page, PageCache

log = logging.getLogger("judgecal.serve")

#: seconds between two looks at the database's data version
INTERVAL_S = 2.0


class Warmer:
    """The background thread (module doc). ``version``: reads the data version; ``compute``:
    makes the page of a cache key; ``seeds``: the entry pages' keys (read from the database:
    called once per change)."""

    def __init__(self, cache: PageCache, version: Callable[[], object], compute: Callable[[tuple], Page],
                 seeds: Callable[[], Iterable[tuple]], *, interval: float = INTERVAL_S, max_recent: int = 32):
        self.cache, self._version, self._compute, self._seeds = cache, version, compute, seeds
        self.interval, self.max_recent = interval, max_recent
        self._asked: OrderedDict[tuple, None] = OrderedDict()  # keys requests found stale, oldest first
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cycles = 0  # completed warm cycles (tests and the benchmark read it)
        self.computed = 0  # pages computed by the warmer
        self.last_cycle_s: float | None = None  # seconds the last complete cycle took
        self.warm_version: object = None  # the data version the last complete cycle warmed
        self.last_error: str | None = None  # the last error met (the version could not be read, a page failed)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="judgecal-warm", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def ask(self, key: tuple) -> None:
        """Queue ``key`` (a page a request found stale) first in the next cycle, and wake the thread."""
        with self._lock:
            self._asked[key] = None
            self._asked.move_to_end(key)
        self._wake.set()

    def wait_warm(self, timeout: float) -> bool:
        """Wait until a complete cycle has warmed the current data version (True), or ``timeout``
        seconds (False). For tests and the benchmark."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if self.warm_version is not None and self.warm_version == self._version():
                    return True
            except Exception:  # noqa: BLE001 - the database is away: not warm
                pass
            time.sleep(0.05)
        return False

    def _keys(self) -> list[tuple]:
        with self._lock:
            asked = list(reversed(self._asked))  # the newest request first
            self._asked.clear()
        try:
            seeds = list(self._seeds())
        except Exception as exc:  # noqa: BLE001 - a page that fails says why when it is requested
            log.warning("serve: the entry pages could not be listed: %s", str(exc).splitlines()[0] if str(exc) else exc)
            seeds = []
        recent = list(reversed(self.cache.keys()))[: self.max_recent]
        return list(dict.fromkeys(asked + seeds + recent))

    def _run(self) -> None:
        warmed: object = None
        first = True
        while not self._stop.is_set():
            if not first:
                self._wake.wait(self.interval)
                self._wake.clear()
            first = False
            if self._stop.is_set():
                return
            try:
                version = self._version()
            except Exception as exc:  # noqa: BLE001 - the database is away; the pages say so when asked
                self.last_error = f"data version: {exc}"
                continue
            with self._lock:
                asked = bool(self._asked)
            if version == warmed and not asked:
                continue
            t0 = time.perf_counter()
            for key in self._keys():
                if self._stop.is_set():
                    return
                try:
                    now = self._version()
                    if self.cache.fresh(key, now):
                        continue
                    _, hit = self.cache.get_or_compute(key, now, lambda key=key: self._compute(key))
                    self.computed += 0 if hit else 1
                except Exception as exc:  # noqa: BLE001 - never kills the thread; the request path reports it
                    self.last_error = f"{key[0]}: {exc}"
                    log.warning("serve: could not compute %s ahead: %s", key[0], exc)
            warmed = version
            self.warm_version = version
            self.last_cycle_s = time.perf_counter() - t0
            self.cycles += 1
