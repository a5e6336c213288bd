"""The page cache of ``judgecal serve``: a page computed once is served again, byte for byte,
until the database changes.

An entry is keyed on the page's path and query (the token left out) and stamped with the
database's data version (:func:`judgecal.db.engine.data_version`), read *before* the page is
computed: a write that lands while a page is computed changes the version, so the next request
computes the page again; a page is never served from data older than the version it was stamped
with. Only 200 responses are kept. The cache is bounded by a number of entries and a number of
bytes (least recently used first out), and one page is computed once at a time (a second
request for the same page waits for the first instead of computing it again beside it: the
score board of a million ratings needs about 1 GB while it is built).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    """A computed page: status code, body (bytes), media type and the response's own headers."""

    status: int
    body: bytes
    media_type: str | None
    headers: tuple[tuple[str, str], ...]
    computed_at: float = 0.0  # time.time() when the page was computed (a stale page says it)


def _body_size(page: Page) -> int:
    return len(page.body)


def _is_ok(page: Page) -> bool:
    return page.status == 200


class PageCache:
    """Least-recently-used pages, at most ``max_entries`` of them and ``max_bytes`` of bodies in
    all (a page bigger than ``max_bytes / max_share`` is served but not kept).
    ``max_entries=0`` turns the cache off. Thread-safe.

    The same cache keeps other computed values stamped with the data version (``judgecal
    serve`` keeps the audits' pair indexes, :class:`judgecal.views.audit.AuditIndex`, in one):
    ``size`` gives a value's bytes (default: a page's body) and ``keep`` whether a computed
    value is kept (default: a page of status 200)."""

    def __init__(self, max_entries: int = 256, max_bytes: int = 64 * 2**20, *, max_share: int = 4,
                 size: Callable[[object], int] = _body_size, keep: Callable[[object], bool] = _is_ok):
        if max_entries < 0 or max_bytes < 0 or max_share < 1:
            raise ValueError("max_entries and max_bytes must be >= 0, max_share >= 1")
        self.max_entries, self.max_bytes, self.max_share = max_entries, max_bytes, max_share
        self._size, self._keep = size, keep
        self._pages: OrderedDict[tuple, tuple[object, Page]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._computing: dict[tuple, threading.Lock] = {}
        self.hits = self.misses = 0

    def _get(self, key: tuple, version: object) -> Page | None:
        with self._lock:
            held = self._pages.get(key)
            if held is None or held[0] != version:
                return None
            self._pages.move_to_end(key)
            self.hits += 1
            return held[1]

    def _put(self, key: tuple, version: object, page: Page) -> None:
        size = self._size(page)
        if self.max_entries == 0 or size > self.max_bytes // self.max_share:
            self._drop(key)  # an older copy must not outlive the value that replaced it (served stale)
            return
        with self._lock:
            old = self._pages.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old[1])
            self._pages[key] = (version, page)
            self._bytes += size
            while self._pages and (len(self._pages) > self.max_entries or self._bytes > self.max_bytes):
                _, (_, gone) = self._pages.popitem(last=False)
                self._bytes -= self._size(gone)

    def _drop(self, key: tuple) -> None:
        with self._lock:
            old = self._pages.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old[1])

    def fits(self, nbytes: int) -> bool:
        """Whether a value of ``nbytes`` would be kept (the cache is on and it is within its
        share of ``max_bytes``)."""
        return self.max_entries > 0 and nbytes <= self.max_bytes // self.max_share

    def peek(self, key: tuple) -> tuple[object, Page] | None:
        """(version, page) of the page kept for ``key`` whatever its version (None when none is
        kept): what a stale-while-recomputing response shows (judgecal.web.warm)."""
        with self._lock:
            return self._pages.get(key)

    def fresh(self, key: tuple, version: object) -> bool:
        """Whether the page kept for ``key`` was computed at ``version``."""
        with self._lock:
            held = self._pages.get(key)
            return held is not None and held[0] == version

    def computing(self, key: tuple) -> bool:
        """Whether a request or the warmer is computing ``key`` now."""
        with self._lock:
            gate = self._computing.get(key)
            return gate is not None and gate.locked()

    def keys(self) -> list[tuple]:
        """The keys kept, most recently used last."""
        with self._lock:
            return list(self._pages)

    def get_or_compute(self, key: tuple, version: object, compute: Callable[[], Page]) -> tuple[Page, bool]:
        """(the page, whether it came from the cache). ``version``: the database's data version
        read before this call; ``compute``: makes the page (what it raises propagates, nothing
        is kept)."""
        page = self._get(key, version)
        if page is not None:
            return page, True
        with self._lock:
            gate = self._computing.setdefault(key, threading.Lock())
        with gate:
            page = self._get(key, version)  # computed by the request we waited for
            if page is not None:
                return page, True
            with self._lock:
                self.misses += 1
            page = compute()
            if self._keep(page):
                self._put(key, version, page)
            else:  # the data changed and the page is now an error: its old copy must not be served stale
                self._drop(key)
        with self._lock:
            if not gate.locked():
                self._computing.pop(key, None)
        return page, False

    def __len__(self) -> int:
        return len(self._pages)

    @property
    def size_bytes(self) -> int:
        """Bytes of the bodies kept."""
        return self._bytes
