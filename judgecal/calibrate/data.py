"""Input containers of the calibration maths: labelled pairs, pointwise labels, verbosity pairs.

Plain frozen dataclasses of numpy arrays; construction validates shapes and values and raises
:class:`judgecal.errors.InputError` naming the offending field (never a traceback deep inside
numpy or scipy). Lengths are in one unit chosen by the caller (tokens, words, characters or
UTF-8 bytes); scores in the judge's scale units.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from judgecal.errors import InputError


def _float_array(name: str, values, n: int | None = None, *, allow_nan: bool = False) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InputError(f"field {name}: not numeric ({exc})") from None
    if n is not None and arr.shape[0] != n:
        raise InputError(f"field {name}: {arr.shape[0]} values, expected {n}")
    bad = ~np.isfinite(arr) if not allow_nan else np.isinf(arr)
    if np.any(bad):
        raise InputError(f"field {name}: non-finite value at position {int(np.argmax(bad))}")
    return arr


def _lengths(name: str, values, n: int) -> np.ndarray:
    arr = _float_array(name, values, n)
    if np.any(arr < 0):
        raise InputError(f"field {name}: negative length at position {int(np.argmax(arr < 0))}")
    return arr


def _items(values, n: int) -> np.ndarray:
    arr = np.asarray(values).reshape(-1)
    if arr.shape[0] != n:
        raise InputError(f"field item_ids: {arr.shape[0]} values, expected {n}")
    return arr


@dataclass(frozen=True)
class PairData:
    """Expert-labelled pairs (a, b) of responses to the same item, shape (n,) each.

    ``outcome``: 1.0 = the expert prefers a, 0.0 = b, 0.5 = tie. ``density_a/_b``: optional
    unique-token entropies in bits (for the density exemption). ``md_a/_b``: optional Markdown
    counts of each answer, shape (n, 3): headers, list items (ordered + unordered), bold spans
    (docs/style.md; the ``lc_glm_style`` candidate's covariates).
    """

    item_ids: np.ndarray
    score_a: np.ndarray
    score_b: np.ndarray
    len_a: np.ndarray
    len_b: np.ndarray
    outcome: np.ndarray
    density_a: np.ndarray | None = field(default=None)
    density_b: np.ndarray | None = field(default=None)
    md_a: np.ndarray | None = field(default=None)
    md_b: np.ndarray | None = field(default=None)

    def __post_init__(self):
        sa = _float_array("score_a", self.score_a)
        n = sa.shape[0]
        set_ = object.__setattr__
        set_(self, "score_a", sa)
        set_(self, "score_b", _float_array("score_b", self.score_b, n))
        set_(self, "len_a", _lengths("len_a", self.len_a, n))
        set_(self, "len_b", _lengths("len_b", self.len_b, n))
        out = _float_array("outcome", self.outcome, n)
        bad = ~np.isin(out, (0.0, 0.5, 1.0))
        if np.any(bad):
            raise InputError(f"field outcome: must be 1.0, 0.0 or 0.5, got {out[bad][0]!r} "
                             f"at position {int(np.argmax(bad))}")
        set_(self, "outcome", out)
        set_(self, "item_ids", _items(self.item_ids, n))
        for name in ("density_a", "density_b"):
            if getattr(self, name) is not None:
                set_(self, name, _float_array(name, getattr(self, name), n))
        if (self.md_a is None) != (self.md_b is None):
            raise InputError("fields md_a, md_b: give both or neither")
        for name in ("md_a", "md_b"):
            if getattr(self, name) is not None:
                counts = _float_array(name, getattr(self, name), 3 * n)
                if np.any(counts < 0):
                    raise InputError(f"field {name}: negative count at position {int(np.argmax(counts < 0)) // 3}")
                set_(self, name, counts.reshape(n, 3))

    @property
    def n(self) -> int:
        return int(self.score_a.shape[0])

    def take(self, idx) -> "PairData":
        """The pairs at integer positions ``idx`` (repeats allowed, e.g. for a bootstrap)."""
        opt = lambda a: None if a is None else a[idx]  # noqa: E731
        return PairData(self.item_ids[idx], self.score_a[idx], self.score_b[idx], self.len_a[idx],
                        self.len_b[idx], self.outcome[idx], opt(self.density_a), opt(self.density_b),
                        opt(self.md_a), opt(self.md_b))


@dataclass(frozen=True)
class PointData:
    """Pointwise expert labels: one judge score, length and expert score per response, (n,)."""

    item_ids: np.ndarray
    score: np.ndarray
    length: np.ndarray
    expert: np.ndarray
    density: np.ndarray | None = field(default=None)

    def __post_init__(self):
        s = _float_array("score", self.score)
        n = s.shape[0]
        set_ = object.__setattr__
        set_(self, "score", s)
        set_(self, "length", _lengths("length", self.length, n))
        set_(self, "expert", _float_array("expert", self.expert, n))
        set_(self, "item_ids", _items(self.item_ids, n))
        if self.density is not None:
            set_(self, "density", _float_array("density", self.density, n))

    @property
    def n(self) -> int:
        return int(self.score.shape[0])

    def take(self, idx) -> "PointData":
        """The responses at integer positions ``idx`` (repeats allowed)."""
        return PointData(self.item_ids[idx], self.score[idx], self.length[idx], self.expert[idx],
                         None if self.density is None else self.density[idx])


@dataclass(frozen=True)
class VerbosityData:
    """Concise/verbose pairs answering the same instruction (need not be expert-labelled), (n,).

    Optional entropies ``density_concise/_verbose`` in bits for the density exemption.
    """

    score_concise: np.ndarray
    score_verbose: np.ndarray
    len_concise: np.ndarray
    len_verbose: np.ndarray
    density_concise: np.ndarray | None = field(default=None)
    density_verbose: np.ndarray | None = field(default=None)

    def __post_init__(self):
        c = _float_array("score_concise", self.score_concise)
        n = c.shape[0]
        set_ = object.__setattr__
        set_(self, "score_concise", c)
        set_(self, "score_verbose", _float_array("score_verbose", self.score_verbose, n))
        set_(self, "len_concise", _lengths("len_concise", self.len_concise, n))
        set_(self, "len_verbose", _lengths("len_verbose", self.len_verbose, n))
        for name in ("density_concise", "density_verbose"):
            if getattr(self, name) is not None:
                set_(self, name, _float_array(name, getattr(self, name), n))

    @property
    def n(self) -> int:
        return int(self.score_concise.shape[0])

    def take(self, idx) -> "VerbosityData":
        opt = lambda a: None if a is None else a[idx]  # noqa: E731
        return VerbosityData(self.score_concise[idx], self.score_verbose[idx], self.len_concise[idx],
                             self.len_verbose[idx], opt(self.density_concise), opt(self.density_verbose))
