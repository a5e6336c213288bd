"""The LLMBar repository's own statistics (``statistics.json``), reproduced, and how they
differ from judgecal's figures.

Pure Python/numpy, no I/O. Source: princeton-nlp/LLMBar ``LLMEvaluator/evaluate.py`` (the end of
its ``__main__`` block writes ``statistics.json``; ``annotate`` writes each record's
``results``). Its definitions, per judge x protocol x set of n pairs, where ``label`` is the
expert's better output (1 or 2) and ``w_F`` / ``w_T`` are the judge's final winners ("1", "2"
or None = the output matched no verdict pattern) with the outputs shown in the dataset's order
(``swap = False``) and swapped (``swap = True``, already mapped back to the dataset's numbering):

* ``correct_False`` / ``correct_True``: ``"{c} / {n} = {100 c / n}%"`` with c the pairs where
  that order's winner equals the label (None is wrong); ``correct_average``:
  ``"{(c_F + c_T) / 2 / n * 100}%"``; ``correct_both``: pairs right in both orders; ``equal``:
  pairs whose two winners are equal - **None equals None** (two unparsed outputs count as a
  consistent verdict).
* ``kappa_False`` / ``kappa_True`` / ``kappa_agreement``: scikit-learn's ``cohen_kappa_score``
  where each winner is coded **1 if it is "1", else 0** ("2" and None both become 0) while the
  expert label stays 1 or 2. The judge's codes {0, 1} and the label's {1, 2} share only the
  value 1, so only "output 1 wins" on a pair whose label is 1 counts as agreement: these kappas
  are not chance-corrected agreement with the experts (a perfect judge on balanced labels gets
  about 0.33, not 1). ``kappa_average`` is the mean of the first two; ``kappa_agreement``
  compares the two orders' codes (so "2" agrees with None).
* Rating protocols (``Rating*``): the two outputs are scored one at a time; the winners are
  derived from the scores with Python's ``int()``: ``w_F = "1" if s1 > s2 else "2"``,
  ``w_T = "2" if s2 > s1 else "1"``, so a tie goes to output 2 in one order and to output 1 in
  the other (half credit on average, never "equal"); a score ``int()`` cannot read (an empty
  string) gives ``w_F = "1"``, ``w_T = "2"``.

judgecal's own figures (:mod:`judgecal.calibrate.winrate`, the report's position section) leave
unparsed verdicts out instead of counting them wrong (and never count two of them as
consistent), give a tie half credit, and compute Cohen's kappa on the same labels for both
raters; where the two definitions differ the report prints both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The keys of the repository's statistics.json, in its order.
KEYS = ("correct_False", "correct_True", "correct_average", "correct_both", "equal",
        "kappa_False", "kappa_True", "kappa_average", "kappa_agreement")
#: Keys holding text figures ("94 / 100 = 94.0%") and keys holding numbers.
TEXT_KEYS = KEYS[:5]
NUMBER_KEYS = KEYS[5:]
#: Relative tolerance of a kappa comparison (the repository prints full float precision; a
#: different summation order may move the last bits).
KAPPA_RTOL = 1e-9


def cohen_kappa(y1: Sequence, y2: Sequence) -> float:
    """Cohen's kappa of two label sequences, as scikit-learn's ``cohen_kappa_score`` (no
    weights) computes it: the confusion matrix over the union of both raters' labels,
    expected counts from its margins, ``kappa = 1 - sum(off-diagonal observed) /
    sum(off-diagonal expected)``. Shapes (n,), (n,) -> float; NaN when the expected
    off-diagonal sum is 0 (scikit-learn returns NaN there too)."""
    labels = sorted(set(y1) | set(y2), key=lambda v: (str(type(v)), v))
    index = {v: i for i, v in enumerate(labels)}
    k = len(labels)
    conf = np.zeros((k, k), dtype=np.int64)
    for a, b in zip(y1, y2):
        conf[index[a], index[b]] += 1
    sum0, sum1 = conf.sum(axis=0), conf.sum(axis=1)
    expected = np.outer(sum0, sum1) / sum0.sum()
    w = np.ones((k, k), dtype=int)
    w.flat[:: k + 1] = 0
    denominator = float(np.sum(w * expected))
    if denominator == 0.0:
        return float("nan")
    return float(1.0 - np.sum(w * conf) / denominator)


def winners_from_scores(raw_1: str | None, raw_2: str | None) -> tuple[str, str]:
    """The repository's (``swap = False``, ``swap = True``) winners of a Rating protocol from the
    two raw score strings, read with Python's ``int()`` as ``annotate`` reads them (module doc)."""
    try:
        s1, s2 = int(raw_1), int(raw_2)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "1", "2"
    return ("1" if s1 > s2 else "2"), ("2" if s2 > s1 else "1")


def _share(c: int, n: int) -> str:
    return "{} / {} = {}%".format(c, n, c / n * 100)


def repository_statistics(labels: Sequence, win_false: Sequence[str | None],
                          win_true: Sequence[str | None]) -> dict:
    """The figures of the repository's statistics.json from the expert labels (1 or 2, as the
    result file holds them: the kappas compare against these values) and the final winners of
    each pair in the two orders ("1", "2" or None). Shapes (n,) each; text figures formatted
    exactly as the repository formats them, kappas as floats (module doc). Empty input: {}."""
    n = len(labels)
    if n == 0:
        return {}
    gold = [str(x) for x in labels]
    cf = sum(w == g for w, g in zip(win_false, gold))
    ct = sum(w == g for w, g in zip(win_true, gold))
    both = sum(f == g and t == g for f, t, g in zip(win_false, win_true, gold))
    equal = sum(f == t for f, t in zip(win_false, win_true))
    code_f = [1 if w == "1" else 0 for w in win_false]
    code_t = [1 if w == "1" else 0 for w in win_true]
    kf, kt = cohen_kappa(code_f, list(labels)), cohen_kappa(code_t, list(labels))
    return {"correct_False": _share(cf, n), "correct_True": _share(ct, n),
            "correct_average": "{}%".format((cf + ct) / 2 / n * 100),
            "correct_both": _share(both, n), "equal": _share(equal, n),
            "kappa_False": kf, "kappa_True": kt, "kappa_average": (kf + kt) / 2,
            "kappa_agreement": cohen_kappa(code_f, code_t)}


def compare(ours: dict, theirs: dict) -> list[str]:
    """Differences between reproduced figures and a statistics.json's: text figures must be
    equal as printed, kappas within :data:`KAPPA_RTOL` (NaN equals NaN). Only the keys the
    file holds are compared; a key judgecal does not know is named. Returns one line per
    difference (empty: parity)."""
    out = []
    for key, value in theirs.items():
        if key not in ours:
            out.append(f"{key}: not a figure judgecal reproduces (the repository's keys: {', '.join(KEYS)})")
            continue
        mine = ours[key]
        if key in NUMBER_KEYS:
            try:
                v = float(value)
            except (TypeError, ValueError):
                out.append(f"{key}: {value!r} is not a number")
                continue
            same = (math.isnan(v) and math.isnan(mine)) or math.isclose(v, mine, rel_tol=KAPPA_RTOL, abs_tol=1e-12)
            if not same:
                out.append(f"{key}: the file says {v!r}, judgecal gives {mine!r}")
        elif str(value) != mine:
            out.append(f"{key}: the file says {value!r}, judgecal gives {mine!r}")
    return out
