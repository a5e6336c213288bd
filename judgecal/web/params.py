"""A page's query parameters (:class:`Params`): each read once, typed and checked; a value that
cannot be used is a :class:`BadRequest` (a 400 page with one line)."""

from __future__ import annotations

import datetime as dt
import math

from starlette.requests import Request

MAX_BOOTSTRAP = 100000
#: parameters that name a model or judge as stored: matched exactly, spaces around them kept (an
#: import stores a model's name as given)
EXACT_NAMES = ("model", "judge", "baseline")
#: parameters that name something an import stored (a family's name is trimmed at import, its
#: inside kept): the control characters an import accepted are allowed in them, NUL never
STORED_NAMES = EXACT_NAMES + ("family",)


class BadRequest(Exception):
    """A query parameter that cannot be used (a 400 page with this one-line message)."""


class Params:
    """A page's query parameters: each read once, typed and checked; names the page does not
    read are refused (:meth:`check_unknown`)."""

    def __init__(self, request: Request, allowed: tuple[str, ...]):
        self.q = request.query_params
        self.allowed = set(allowed) | {"token", "fresh"}
        self.check_unknown()
        self.flag("fresh")  # every page takes it (judgecal.web.warm): checked like any other value

    def check_unknown(self) -> None:
        unknown = sorted(set(self.q.keys()) - self.allowed)
        if unknown:
            takes = ", ".join(sorted(self.allowed - {"token", "fresh"})) or "no parameters"
            raise BadRequest(f"unknown query parameter {unknown[0]!r} (this page takes: {takes})")

    def text(self, name: str, default: str | None = None, max_len: int = 500) -> str | None:
        """The parameter's value (spaces around it dropped), ``default`` when absent or blank.
        ``model`` and ``judge`` name something stored as given: matched exactly (spaces kept),
        control characters an import accepted allowed (a NUL is not)."""
        vals = self.q.getlist(name)
        if len(vals) > 1:
            raise BadRequest(f"{name} is given {len(vals)} times: give it once")
        stored_name = name in EXACT_NAMES  # names stored as given: matched exactly
        v = (vals[0] if stored_name else vals[0].strip()) if vals else ""
        if not v.strip():
            return default
        return self._check(name, v, max_len)

    def given(self, name: str) -> str | None:
        """The value of ``name`` as given (read and checked before), for a form to send back
        unchanged: spaces around it dropped except for ``model`` and ``judge`` (matched exactly),
        None when absent or blank."""
        vals = self.q.getlist(name)
        if not vals or not vals[0].strip():
            return None
        return vals[0] if name in EXACT_NAMES else vals[0].strip()

    def texts(self, name: str, max_n: int = 20, max_len: int = 500) -> list[str]:
        vals = [v.strip() for v in self.q.getlist(name) if v.strip()]
        if len(vals) > max_n:
            raise BadRequest(f"{name} is given {len(vals)} times: at most {max_n}")
        return list(dict.fromkeys(self._check(name, v, max_len) for v in vals))

    @staticmethod
    def _check(name: str, v: str, max_len: int) -> str:
        """``v`` when it fits ``max_len``; a name stored by an import (:data:`STORED_NAMES`) may hold
        the control characters the import accepted (not NUL), any other value none."""
        if len(v) > max_len:
            raise BadRequest(f"{name} is {len(v)} characters long: at most {max_len}")
        if name in STORED_NAMES:
            if "\x00" in v:
                raise BadRequest(f"{name} holds a control character (NUL)")
        elif any(ord(c) < 32 for c in v):
            raise BadRequest(f"{name} holds a control character")
        return v

    def integer(self, name: str, default: int | None = None, lo: int | None = None, hi: int | None = None) -> int | None:
        v = self.text(name, max_len=20)
        if v is None:
            return default
        try:
            n = int(v)
        except ValueError:
            raise BadRequest(f"{name} must be an integer, got {v!r}") from None
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            raise BadRequest(f"{name} must be {_range(lo, hi)}, got {n}")
        return n

    def number(self, name: str, default: float | None = None, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False) -> float | None:
        v = self.text(name, max_len=40)
        if v is None:
            return default
        try:
            x = float(v)
        except ValueError:
            raise BadRequest(f"{name} must be a number, got {v!r}") from None
        if not math.isfinite(x) or (lo is not None and (x < lo or (lo_open and x == lo))) or (hi is not None and x > hi):
            raise BadRequest(f"{name} must be a finite number{' ' + _range(lo, hi) if lo is not None or hi is not None else ''}"
                             f", got {v!r}")
        return x

    def choice(self, name: str, options, default: str | None = None) -> str | None:
        v = self.text(name)
        if v is None:
            return default
        if v not in options:
            raise BadRequest(f"{name} must be one of {', '.join(options)}, got {v!r}")
        return v

    def date(self, name: str) -> dt.date | None:
        v = self.text(name, max_len=10)
        if v is None:
            return None
        try:
            return dt.date.fromisoformat(v)
        except ValueError:
            raise BadRequest(f"{name} must be a date as YYYY-MM-DD, got {v!r}") from None

    def flag(self, name: str) -> bool:
        v = self.text(name, max_len=5)
        if v is None:
            return False
        if v.lower() in ("1", "true", "yes", "on"):
            return True
        if v.lower() in ("0", "false", "no", "off"):
            return False
        raise BadRequest(f"{name} must be 1 or 0, got {v!r}")

    def fmt(self) -> str:
        return self.choice("format", ("html", "json"), "html")

    def carried(self, *exclude: str) -> dict[str, list[str]]:
        """Every parameter given (read and checked before), but ``exclude`` and the token, as
        :func:`link` takes them: a chooser page carries them into each choice's link, so that a
        ``seed`` or ``bootstrap`` given before the judge is chosen is honoured, never dropped."""
        skip = set(exclude) | {"token", "fresh"}
        out: dict[str, list[str]] = {}
        for k, v in self.q.multi_items():
            if k not in skip and v.strip():
                out.setdefault(k, []).append(v.strip())
        return out

    def resamples(self, default: int) -> int:
        """The ``bootstrap`` parameter: 0 (no CIs) or 20 to :data:`MAX_BOOTSTRAP`, as the CLI's
        ``--bootstrap`` (1 to 19 resamples cannot place a 95% interval)."""
        n = self.integer("bootstrap", default, 0, MAX_BOOTSTRAP)
        if 0 < n < 20:
            raise BadRequest(f"bootstrap={n} resamples cannot give a 95% interval: give 0 (no CIs) or at least 20")
        return n

    def seed(self, default: int = 0) -> int:
        """The ``seed`` parameter in the CLI's range, 0..2**31-1 (numpy refuses a negative seed)."""
        return self.integer("seed", default, 0, 2**31 - 1)


#: the largest id of an integer column on both dialects (PostgreSQL's int4; the CLI's bound too)
MAX_ID = 2**31 - 1


def _calibration_id(value: str, what: str) -> int:
    """A calibration id given in a query string: digits 0-9 only, at most :data:`MAX_ID`
    (a larger one is no stored id: SQLite cannot bind it, PostgreSQL refuses it). BadRequest else."""
    if not (value.isascii() and value.isdigit()):
        raise BadRequest(f"calibration must be {what}, got {value!r}")
    if int(value) > MAX_ID:
        raise BadRequest(f"calibration must be {what}: ids are at most {MAX_ID}, got {value}")
    return int(value)


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"between {lo} and {hi}"
    return f"at least {lo}" if lo is not None else f"at most {hi}"
