"""Style control of a Bradley-Terry board: the style covariates of a battle, as Arena-Hard-Auto
builds them. Pure numpy; no I/O.

Source: lmarena/arena-hard-auto ``show_result.py``, ``print_leaderboard_with_style_features``
(v2.0), on the answers' metadata of ``utils/add_markdown_info.py`` (``token_len``, then
``header_count``, ``list_count``, ``bold_count``, each a dict of counts summed over its keys:
headers h1-h6, ordered plus unordered list items, ``**`` plus ``__`` bold spans). For a battle
between answer a (the model's) and answer b (the opponent's), with lengths ``L`` and Markdown
counts ``c``:

- length: ``(L_a - L_b) / (L_a + L_b)``;
- each Markdown feature: the densities ``d = c / L`` (count per length unit), then
  ``(d_a - d_b) / (d_a + d_b + 1)``;
- every feature column then standardised over the battles: ``(x - mean) / std`` (``torch.std``:
  the sample standard deviation, n - 1 in the denominator), once, on the full data (the bootstrap
  resamples keep these columns as they are, as Arena-Hard-Auto's ``bootstrap_pairwise_model``
  resamples rows of the one standardised matrix).

``--control length`` keeps the first column, ``markdown`` the three Markdown ones, ``both`` all
four (Arena-Hard-Auto's ``control_features``). Two cases Arena-Hard-Auto leaves to NaN get a
value here, documented in docs/style.md: a battle of two empty answers (``L_a + L_b = 0``) has
length difference 0, and an empty answer's densities are 0. A column constant over the battles
(no answer has a header, say) has no standard deviation: it is not standardised but left out,
and the caller says so (:func:`style_matrix` returns what it left out).

The fitted coefficient ``gamma`` of a column is in log-odds per standard deviation of that
column: +1 sd of the feature difference (a minus b) multiplies a's odds of being preferred by
``exp(gamma)``. A model's controlled coefficient is its log-odds against the baseline at
standardised features 0 (the mean style difference of the battles), as Arena-Hard-Auto's
``to_winrate_probabilities`` reads the model coefficients alone."""

from __future__ import annotations

import math

import numpy as np

#: every style column, in Arena-Hard-Auto's order
FEATURES = ("length", "headers", "lists", "bold")
CONTROLS = {"none": (), "length": ("length",), "markdown": ("headers", "lists", "bold"),
            "both": FEATURES}
#: what each column measures, in words
DESCRIBE = {
    "length": "length difference (L_a - L_b) / (L_a + L_b)",
    "headers": "header density difference (d_a - d_b) / (d_a + d_b + 1), d = headers per length unit",
    "lists": "list-item density difference (d_a - d_b) / (d_a + d_b + 1), d = list items per length unit",
    "bold": "bold density difference (d_a - d_b) / (d_a + d_b + 1), d = bold spans per length unit",
}


def raw_features(len_a, len_b, md_a, md_b) -> np.ndarray:
    """The unstandardised style differences of n battles, shape (n, 4), columns
    :data:`FEATURES`.

    Args: len_a, len_b (n,) lengths of the two answers (>= 0, any unit); md_a, md_b (n, 3) their
    Markdown counts (headers, list items, bold spans). Raises ValueError for a negative or
    non-finite length or count."""
    la = np.asarray(len_a, dtype=float)
    lb = np.asarray(len_b, dtype=float)
    ca = np.asarray(md_a, dtype=float).reshape(la.size, 3)
    cb = np.asarray(md_b, dtype=float).reshape(lb.size, 3)
    for v in (la, lb, ca, cb):
        if v.size and (not np.all(np.isfinite(v)) or np.any(v < 0)):
            raise ValueError("lengths and Markdown counts must be finite and >= 0")
    out = np.zeros((la.size, 4))
    tot = la + lb
    np.divide(la - lb, tot, out=out[:, 0], where=tot > 0)
    da = np.zeros_like(ca)
    db = np.zeros_like(cb)
    np.divide(ca, la[:, None], out=da, where=la[:, None] > 0)
    np.divide(cb, lb[:, None], out=db, where=lb[:, None] > 0)
    out[:, 1:] = (da - db) / (da + db + 1.0)
    return out


#: a fitted coefficient whose share of some battle's log-odds exceeds this (odds 1e13: a fitted probability
#: numerically 0 or 1) is a maximum at infinity, not a fit: under separation (every battle where the column
#: differs won by the side with more of it, say bold in 3 answers of 200) Newton's steps grow the coefficient
#: until the likelihood is flat in float arithmetic and report convergence there (seen: 5e14 on a header
#: column; 7.3 per sd on a bold column whose 3 nonzero battles stand 8 sd out, 58 log-odds; a bold CI of
#: [-32.6, 472.3] on a board)
MAX_COEF = 30.0


#: the covariates' joint share of one battle's log-odds beyond which the fit counts as run off (p = 3e-7):
#: Newton's steps stop where the likelihood is flat, which for several collinear or dense columns is
#: already 15-25 log-odds (seen by a break-it run: a length coefficient of +16.8 per sd with a CI of
#: [16.3, 17.1] on battles the model won 40% of), below :data:`MAX_COEF`
MAX_ETA = 15.0


def run_off(gamma: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Bool mask (k,) of the column to leave out where the covariates together put some battle
    beyond :data:`MAX_ETA` log-odds (``|Z[r] . gamma|``): the column with the largest share of
    that battle's covariate log-odds; all False otherwise."""
    g = np.asarray(gamma, dtype=float)
    out = np.zeros(g.size, dtype=bool)
    if Z.shape[0] == 0 or g.size == 0:
        return out
    eta = Z @ g
    r = int(np.argmax(np.abs(eta)))
    if abs(eta[r]) > MAX_ETA:
        out[int(np.argmax(np.abs(Z[r] * g)))] = True
    return out


#: a style coefficient beyond this many log-odds per sd (odds ratio 22 000 for one sd of the column) is no
#: fit either: collinear columns running off against each other (seen: length +16.8 and bold -13.8 per sd,
#: their joint share of every battle's log-odds small)
MAX_PER_SD = 10.0


def separated(gamma: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
    """Bool mask (shape of ``gamma``: (k,) or (B, k)) of the coefficients without a finite
    maximum: not finite, beyond :data:`MAX_PER_SD` log-odds per sd, or whose largest
    contribution to a battle's log-odds, ``|gamma_j| * max_r |Z[r, j]|`` (``Z`` (n, k) the
    standardised columns; None: the coefficient alone), is beyond :data:`MAX_COEF` log-odds."""
    g = np.asarray(gamma, dtype=float)
    zmax = np.ones(g.shape[-1]) if Z is None or Z.shape[0] == 0 else np.max(np.abs(Z), axis=0)
    return ~((np.abs(g) * zmax <= MAX_COEF) & (np.abs(g) <= MAX_PER_SD))


#: a column whose sample sd is at most this (times max(1, |mean|)) is constant (left out)
CONSTANT_SD = 1e-12


def style_matrix(raw: np.ndarray, control: str) -> tuple[np.ndarray, list[dict], list[str]]:
    """The standardised covariate columns of ``control`` ("length", "markdown" or "both").

    Returns (Z (n, k) the kept columns standardised, columns [{feature, mean, sd, description}]
    (mean and sample sd of the raw column, for reading a coefficient back in raw units), left out:
    the names of the columns constant over the battles, not identifiable)."""
    if control not in CONTROLS or control == "none":
        raise ValueError(f"control must be one of length, markdown, both (got {control!r})")
    raw = np.asarray(raw, dtype=float)
    cols, kept, left = [], [], []
    for name in CONTROLS[control]:
        j = FEATURES.index(name)
        x = raw[:, j]
        sd = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
        mean = float(np.mean(x)) if x.size else 0.0
        # constant up to rounding (identical values whose mean is not exact give an sd of ~1e-17):
        # standardising by such an sd would blow rounding noise up to a column of +-1
        if not sd > CONSTANT_SD * max(1.0, abs(mean)) or not math.isfinite(sd):
            left.append(name)
            continue
        kept.append((x - mean) / sd)
        cols.append({"feature": name, "mean": mean, "sd": sd, "description": DESCRIBE[name]})
    Z = np.stack(kept, axis=1) if kept else np.zeros((raw.shape[0], 0))
    return Z, cols, left


def meaning(feature: str, gamma: float) -> str:
    """One sentence reading a coefficient (log-odds per sd of the standardised column)."""
    what = {"length": "length difference", "headers": "header density difference",
            "lists": "list-item density difference", "bold": "bold density difference"}[feature]
    if not math.isfinite(gamma):
        return f"no finite coefficient for the {what}"
    if abs(gamma) > 700:  # exp overflows: the feature separates the verdicts, the fit runs off
        return (f"the {what} (a minus b) all but separates the verdicts: coefficient {gamma:+.3g}, no finite odds "
                "ratio (too few battles to estimate it)")
    ratio = math.exp(gamma)
    return (f"+1 sd of the {what} (a minus b) multiplies a's odds of being preferred by "
            + (f"{ratio:.3f}" if ratio < 1e6 else f"{ratio:.3g}"))  # a fit that runs off: no 300-digit number


#: the Markdown features whose density the stuffing guard compares across models
MARKDOWN = ("headers", "lists", "bold")
#: one model is "far outside" the others' style when its mean density of a Markdown feature is more
#: than this many times the highest mean density among the other models
FAR_OUTSIDE = 2.0
#: a group of several models is far outside when its lowest mean density of a feature is more than
#: this many times the highest among the rest: real models that share a style come in clusters (on the
#: 26 AlpacaEval models the three heaviest bold users sit 9.7 times above the rest in words, 9.9 in
#: tokens, with wizardlm-13b as the baseline), so a group needs a wider gap than one model to be told
#: from them
FAR_OUTSIDE_GROUP = 20.0
#: the stuffing guard needs at least this many models outside the candidate (or group) to read a range from
FAR_OUTSIDE_MIN_MODELS = 3
#: a feature no other model uses flags the models that do only where it appears in at least this share
#: of their answers (one header in 805 answers is not a style)
FAR_OUTSIDE_MIN_SHARE = 0.1


def model_densities(model, length, counts, n_models: int) -> np.ndarray:
    """Each model's mean Markdown densities over its answers, shape (n_models, 3) in
    :data:`MARKDOWN` order (NaN for a model without answers).

    Args: ``model`` (n,) model codes of n distinct answers; ``length`` (n,) their lengths (>= 0,
    the board's unit); ``counts`` (n, 3) their headers, list items and bold spans. An answer's
    density is count / length (0 for an empty answer, as :func:`raw_features` takes it)."""
    model = np.asarray(model, dtype=np.int64).reshape(-1)
    le = np.asarray(length, dtype=float).reshape(-1)
    c = np.asarray(counts, dtype=float).reshape(le.size, 3)
    d = np.zeros_like(c)
    np.divide(c, le[:, None], out=d, where=le[:, None] > 0)
    return _model_means(model, d, n_models)


def model_shares(model, counts, n_models: int) -> np.ndarray:
    """Each model's share of answers carrying each Markdown feature (count > 0), shape
    (n_models, 3) in :data:`MARKDOWN` order, in [0, 1] (NaN for a model without answers). Args as
    :func:`model_densities`."""
    model = np.asarray(model, dtype=np.int64).reshape(-1)
    c = np.asarray(counts, dtype=float).reshape(model.size, 3)
    return _model_means(model, (c > 0).astype(float), n_models)


def _model_means(model: np.ndarray, values: np.ndarray, n_models: int) -> np.ndarray:
    n = np.bincount(model, minlength=n_models).astype(float)
    out = np.full((n_models, values.shape[1]), np.nan)
    for j in range(values.shape[1]):
        s = np.bincount(model, weights=values[:, j], minlength=n_models)
        np.divide(s, n, out=out[:, j], where=n > 0)
    return out


def far_outside(dens: np.ndarray, candidates, reference, share: np.ndarray | None = None) -> dict[int, list[dict]]:
    """The stuffing guard: {model code: [{feature, density, highest, threshold, low, group}]} of the
    ``candidates`` (model codes) whose mean density of a Markdown feature (``dens`` from
    :func:`model_densities`) lies far above the range of the ``reference`` models (codes; the
    candidates among them), per feature:

    - **one model**: its density is above :data:`FAR_OUTSIDE` times ``highest``, the largest
      density of the feature among the reference models other than it;
    - **a group**: the k candidates of highest density (2 <= k, fewer than half the reference
      models) whose lowest density is above :data:`FAR_OUTSIDE_GROUP` times the highest among the
      reference models outside the group -- so two stuffed models cannot hide each other, while
      a cluster of real models that share a style (a gap under that factor) is not flagged;
    - **a feature no model outside the candidate (or group) uses** (``highest`` 0): flagged
      where the feature appears in at least :data:`FAR_OUTSIDE_MIN_SHARE` of the model's answers
      (``share`` from :func:`model_shares`; without it, any use); its coefficient would rest on
      those models' own answers alone.

    ``group`` lists the codes read together (one code for a single model), ``low`` is their
    lowest density, ``threshold`` the factor times ``highest`` (0 for an unused feature). Nothing is read when fewer than
    :data:`FAR_OUTSIDE_MIN_MODELS` reference models lie outside the candidate or group; candidates
    tied in density are never split between a group and the rest. Each model keeps its first hit
    per feature (the smallest group). NaN densities (no answers) are neither candidates nor reference.

    Why above only: a density far above every other model's is a style the fit never saw, so
    its covariate lies beyond the range its coefficient was estimated on and the correction is
    an extrapolation; a density of 0 (no Markdown at all) is inside the range of any family."""
    out: dict[int, list[dict]] = {}
    ref = [int(r) for r in reference if np.all(np.isfinite(dens[int(r)]))]
    in_ref = set(ref)
    cand = [int(i) for i in candidates if int(i) in in_ref]
    max_group = max(1, (len(ref) - 1) // 2)
    for j, feat in enumerate(MARKDOWN):
        order = sorted(cand, key=lambda i: (-dens[i, j], i))
        hit: set[int] = set()
        for k in range(1, min(max_group, len(order)) + 1):
            group = order[:k]
            if k < len(order) and dens[order[k], j] == dens[group[-1], j]:
                continue  # a tie straddles the cut: the tied models go together or not at all
            members = set(group)
            rest = [r for r in ref if r not in members]
            if len(rest) < FAR_OUTSIDE_MIN_MODELS:
                break
            top = float(np.max(dens[rest, j]))
            low = float(dens[group[-1], j])
            factor = FAR_OUTSIDE if k == 1 else FAR_OUTSIDE_GROUP
            if top > 0:
                flagged = group if low > factor * top else []
            else:
                flagged = [i for i in group if dens[i, j] > 0
                           and (share is None or share[i, j] >= FAR_OUTSIDE_MIN_SHARE)]
            for i in flagged:
                if i not in hit:
                    hit.add(i)
                    out.setdefault(i, []).append({"feature": feat, "density": float(dens[i, j]), "highest": top,
                                                  "threshold": factor * top, "low": low, "group": list(group)})
    return {i: out[i] for i in sorted(out)}


def no_lift(controlled: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """The stuffing guard's cap: a flagged model's controlled coefficient is at most its
    uncontrolled one (elementwise minimum; NaN stays NaN), as a degenerate answer's calibrated
    score is at most its raw one (:mod:`judgecal.calibrate.guards`). Shapes broadcast."""
    return np.minimum(np.asarray(controlled, dtype=float), np.asarray(plain, dtype=float))


#: a style column whose part outside the span of the model columns and the columns before it has
#: less than this share of its sum of squares is not identified apart from them
COLLINEAR_SHARE = 1e-8


def collinear(model_a, model_b, n_models: int, anchor: int, Z: np.ndarray) -> np.ndarray:
    """Which standardised style columns of ``Z`` (n battles, k) the Bradley-Terry fit cannot tell
    apart from the models' ratings and the columns before them (bool, shape (k,)), in order: a
    column is kept when the part of it outside the span of the model columns (+1 for a's model,
    -1 for b's, the ``anchor`` left out) and the kept columns before it holds more than
    :data:`COLLINEAR_SHARE` of its sum of squares. Such a column has no coefficient of its own: a
    feature only one model's answers carry at a fixed density, two features that always come
    together (``- **bold bullet**``), ... -- the design matrix is rank-deficient and a fit would
    return one of infinitely many equally good splits between the model's rating and the style
    coefficients (statsmodels warns "The design matrix is rank-deficient"). Computed on the
    Gram matrix (models + k square), never on the battles x models matrix."""
    from scipy import sparse

    a = np.asarray(model_a, dtype=np.int64)
    b = np.asarray(model_b, dtype=np.int64)
    Z = np.asarray(Z, dtype=float)
    n, k = Z.shape
    keep_models = np.array([i for i in range(n_models) if i != anchor], dtype=np.int64)
    col = np.full(n_models, -1, dtype=np.int64)
    col[keep_models] = np.arange(keep_models.size)
    rows = np.concatenate([np.arange(n), np.arange(n)])
    cols = np.concatenate([col[a], col[b]])
    vals = np.concatenate([np.ones(n), -np.ones(n)])
    ok = cols >= 0
    M = sparse.csr_matrix((vals[ok], (rows[ok], cols[ok])), shape=(n, keep_models.size))
    MM = (M.T @ M).toarray()
    MZ = np.asarray(M.T @ Z)
    ZZ = Z.T @ Z
    G = np.block([[MM, MZ], [MZ.T, ZZ]])
    p = keep_models.size
    kept = list(range(p))
    out = np.zeros(k, dtype=bool)
    for j in range(k):
        jj = p + j
        total = G[jj, jj]
        if not total > 0:
            out[j] = True
            continue
        A = np.ix_(kept, kept)
        g = G[kept, jj]
        resid = total - g @ np.linalg.pinv(G[A], hermitian=True) @ g
        if resid <= COLLINEAR_SHARE * total:
            out[j] = True
        else:
            kept.append(jj)
    return out
