"""Multiple-choice metrics and diagnostics: pure numpy, no I/O.

For one item with choices y_1..y_k, ``ll[i] = sum_t log p(y_i,t | x, y_i,<t)`` in nats (the
continuation includes the target delimiter). Predictions (``np.argmax``, so ties go to the
first choice, as in lm-evaluation-harness):

- ``acc``:           argmax ll                                   (lm_eval/api/task.py, multiple_choice
                                                                  ``process_results``: ``pred = np.argmax(lls)``)
- ``acc_norm``:      argmax ll / len(choice) in characters       (same place: ``completion_len =
                                                                  len(choice)``; the choice from
                                                                  ``doc_to_choice``, WITHOUT the delimiter)
- ``acc_bytes``:     argmax ll / len(choice.encode("utf-8"))     (same place: ``byte_length``; DESIGN.md's
                                                                  tokenizer-independent acc_norm)
- ``acc_per_token``: argmax ll / number of continuation tokens   (DESIGN.md)
- ``acc_pmi``:       argmax ll(y|x) - ll(y|null context)         (lm-eval ``acc_mutual_info``, whose null
                                                                  context is the empty string)

Aggregates are means over items with ``stderr = sample std (ddof=1) / sqrt(n)``
(lm_eval/api/metrics.py ``mean_stderr``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

METRICS = ("acc", "acc_norm", "acc_bytes", "acc_per_token", "acc_pmi")
OPPOSITE_MESSAGE = "output distribution changed shape, not capability"


def n_chars(choice: str) -> int:
    """Length of ``choice`` in characters (Unicode code points), as lm-eval's ``len(choice)``."""
    return len(choice)


def n_bytes(choice: str) -> int:
    """Length of ``choice`` in UTF-8 bytes."""
    return len(choice.encode("utf-8"))


def item_scores(ll: Sequence[float], chars: Sequence[int], nbytes: Sequence[int], ntokens: Sequence[int],
                ll_null: Sequence[float] | None = None) -> dict[str, np.ndarray | None]:
    """The per-choice scores (float64) each metric takes the argmax of, for one item:
    ``acc`` ll, ``acc_norm`` ll / characters, ``acc_bytes`` ll / bytes, ``acc_per_token``
    ll / tokens, ``acc_pmi`` ll - ll_null (None without ``ll_null``). Arguments as
    :func:`item_predictions`."""
    ll_a = np.asarray(ll, dtype=np.float64)
    return {
        "acc": ll_a,
        "acc_norm": ll_a / np.asarray(chars, dtype=np.float64),
        "acc_bytes": ll_a / np.asarray(nbytes, dtype=np.float64),
        "acc_per_token": ll_a / np.asarray(ntokens, dtype=np.float64),
        "acc_pmi": None if ll_null is None else ll_a - np.asarray(ll_null, dtype=np.float64),
    }


def item_predictions(ll: Sequence[float], chars: Sequence[int], nbytes: Sequence[int],
                     ntokens: Sequence[int], ll_null: Sequence[float] | None = None) -> dict[str, int | None]:
    """Predicted choice index under each metric for one item.

    ``ll``: per-choice log-likelihood (nats), shape (k,); ``chars``/``nbytes``/``ntokens``:
    per-choice lengths (characters and bytes of the raw choice, tokens of the scored
    continuation); ``ll_null``: per-choice ll under the null context or None (then
    ``acc_pmi`` is None). Formulas in the module docstring. Ties -> first choice."""
    return {m: None if v is None else int(np.argmax(v))
            for m, v in item_scores(ll, chars, nbytes, ntokens, ll_null).items()}


def exact_tie(scores: Sequence[float]) -> bool:
    """True when the largest of ``scores`` is reached by two choices or more, exactly (the same
    float): ``np.argmax`` then picks the first of them (lm-eval's rule, kept), so the prediction
    is decided by the choices' order, not by the model. Scores with a NaN: False (argmax picks
    the first NaN). Pure."""
    a = np.asarray(scores, dtype=np.float64)
    if a.size < 2 or np.isnan(a).any():
        return False
    return bool(np.count_nonzero(a == a.max()) > 1)


def item_ties(ll: Sequence[float], chars: Sequence[int], nbytes: Sequence[int], ntokens: Sequence[int],
              ll_null: Sequence[float] | None = None) -> list[str]:
    """The metrics whose prediction for this item is decided by an exact tie
    (:func:`exact_tie` of :func:`item_scores`), in :data:`METRICS` order."""
    return [m for m, v in item_scores(ll, chars, nbytes, ntokens, ll_null).items() if v is not None and exact_tie(v)]


def count_ties(item_tie_lists: Sequence[Sequence[str]], metrics: Sequence[str] = METRICS) -> dict[str, int]:
    """Items decided by an exact tie, per metric in ``metrics`` (the metrics the run computed):
    ``{metric: count}``, zeros included."""
    return {m: sum(m in t for t in item_tie_lists) for m in metrics}


def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    """(mean, standard error) of ``values``: stderr = sample std (ddof=1) / sqrt(n), as
    lm_eval/api/metrics.py ``mean_stderr``; NaN stderr for n < 2. Raises ValueError if empty."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no values")
    if x.size < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size))


def aggregate(predictions: Sequence[Mapping[str, int | None]], golds: Sequence[int]) -> dict[str, dict]:
    """Per-metric accuracy over items: ``{metric: {"value": mean, "stderr": se, "n": n}}``.
    A metric whose predictions are None (PMI without a null pass) is left out."""
    if len(predictions) != len(golds):
        raise ValueError("predictions and golds differ in length")
    out: dict[str, dict] = {}
    for metric in METRICS:
        preds = [p.get(metric) for p in predictions]
        if not preds or any(p is None for p in preds):
            continue
        hits = [1.0 if p == g else 0.0 for p, g in zip(preds, golds)]
        value, se = mean_stderr(hits)
        out[metric] = {"value": value, "stderr": se, "n": len(hits)}
    return out


def is_letter_key(choices_per_item: Sequence[Sequence[str]]) -> bool:
    """True when every choice of every item is one character after stripping spaces (" A".." D"):
    then every length denominator is equal within an item and acc_norm == acc."""
    return bool(choices_per_item) and all(len(c.strip()) == 1 for cs in choices_per_item for c in cs)


def lint_choices(choices_per_item: Sequence[Sequence[str]]) -> dict[str, int]:
    """Count stray-space problems in raw choice strings (they change the acc_norm/acc_bytes
    denominators): ``trailing_space`` and ``leading_space`` (choices), ``doubled_space``
    (choices containing "  "), ``inconsistent_leading_space`` (items whose choices do not all
    agree on starting with a space)."""
    counts = {"trailing_space": 0, "leading_space": 0, "doubled_space": 0, "inconsistent_leading_space": 0}
    for cs in choices_per_item:
        leads = {c[:1].isspace() for c in cs}
        if len(leads) > 1:
            counts["inconsistent_leading_space"] += 1
        for c in cs:
            counts["trailing_space"] += c != c.rstrip()
            counts["leading_space"] += c != c.lstrip()
            counts["doubled_space"] += "  " in c
    return counts


def diagnostics(choices_per_item: Sequence[Sequence[str]], metrics: Mapping[str, Mapping],
                ties: Mapping[str, int] | None = None) -> dict:
    """Diagnostics printed with the metrics: ``letter_key`` (bool) and ``headline`` (the metric
    names to show first: acc_norm is dropped for letter-key tasks, with ``notes`` saying why),
    ``lint`` (counts from :func:`lint_choices`), ``duplicate_choices`` (items with two
    identical choice strings: equal log-likelihoods, and ties go to the first, so a gold answer
    on a later copy is never predicted), ``acc_norm_minus_acc``, and ``ties`` (items whose
    prediction an exact tie decided, per metric: :func:`count_ties`) when given."""
    letter = is_letter_key(choices_per_item)
    notes: list[str] = []
    headline = [m for m in METRICS if m in metrics]
    if letter:
        headline = [m for m in headline if m not in ("acc_norm", "acc_bytes", "acc_per_token")]
        notes.append("letter-key task: every choice is one character, so acc_norm == acc "
                     "(length normalisation is a no-op); acc_norm dropped from the headline")
    lint = lint_choices(choices_per_item)
    if any(lint.values()):
        notes.append("choice strings carry stray spaces that change the length denominators: "
                     + ", ".join(f"{k} {v}" for k, v in lint.items() if v))
    dups = sum(len(set(cs)) < len(cs) for cs in choices_per_item)
    if dups:
        notes.append(f"{dups} item(s) list the same choice twice: their log-likelihoods tie and ties go "
                     "to the first copy, so a gold answer on a later copy can never be predicted")
    gap = None
    if "acc" in metrics and "acc_norm" in metrics:
        gap = metrics["acc_norm"]["value"] - metrics["acc"]["value"]
    out = {"letter_key": letter, "headline": headline, "lint": lint, "duplicate_choices": dups, "acc_norm_minus_acc": gap,
           "notes": notes}
    if ties is not None:
        out["ties"] = dict(ties)
    return out


def compare_runs(a_metrics: Mapping[str, Mapping], b_metrics: Mapping[str, Mapping]) -> dict:
    """Deltas of every metric present in both runs (judgecal's first, then others such as
    lm-eval's acc_mutual_info, by name; ``b - a``, with the stderr of the
    difference assuming independent runs: sqrt(se_a^2 + se_b^2); None when neither run has one,
    as for lm-eval's perplexities), and the flag
    ``opposite_directions`` when acc and acc_norm move in opposite directions (one up, the
    other down): the output distribution's shape changed, not capability (DESIGN.md)."""
    deltas: dict[str, dict] = {}
    names = [m for m in METRICS if m in a_metrics] + sorted(m for m in a_metrics if m not in METRICS)
    for m in names:
        if m in b_metrics:
            a, b = a_metrics[m], b_metrics[m]
            se = float(np.sqrt(float(a.get("stderr") or 0.0) ** 2 + float(b.get("stderr") or 0.0) ** 2))
            if a.get("stderr") is None and b.get("stderr") is None:  # e.g. lm-eval's perplexities: none known
                se = None
            deltas[m] = {"a": a["value"], "b": b["value"], "delta": b["value"] - a["value"], "stderr": se}
    opposite = False
    if "acc" in deltas and "acc_norm" in deltas:
        da, dn = deltas["acc"]["delta"], deltas["acc_norm"]["delta"]
        opposite = (da > 0 and dn < 0) or (da < 0 and dn > 0)
    return {"deltas": deltas, "opposite_directions": opposite,
            "message": OPPOSITE_MESSAGE if opposite else None}
