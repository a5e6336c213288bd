"""The pairwise-judge section of ``judgecal report``: per task family and judge with pairwise
verdicts, the judge's position bias (pairs judged in both orders: consistency, flip rate,
first-position preference), its agreement with the experts from one order, the other and both
combined, LLMBar's own figures where the verdicts are LLMBar's (``statistics.json``'s
definitions, reproduced), the judge comparison per family, the length preference on pairs and,
on request, length and position together (both orders and a cross-validated length calibration
of the verdicts; docs/report.md)."""

from __future__ import annotations

import numpy as np

from judgecal.calibrate import llmbar_stats
from judgecal.calibrate.position import MODES, compare_judges, cohen_kappa_binary, credits, \
    expert_agreement_by_order, mode_preferences
from judgecal.calibrate.winrate import length_preference, position_consistency
from judgecal.db import models as m
from judgecal.db import positions as pq
from judgecal.db import queries as q
from judgecal.db import verdicts as vq
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope

_WINNER = {"a": "1", "b": "2"}


def _pref(d: dict | None) -> float:
    if d is None or d["status"] != "ok" or d["preference"] is None:
        return float("nan")
    return float(d["preference"])


def repository_figures_of_verdicts(pairs: list[dict]) -> dict:
    """LLMBar's statistics.json figures (:func:`judgecal.calibrate.llmbar_stats.repository_statistics`)
    of a judge's verdicts on expert-labelled pairs (rows of
    :func:`judgecal.db.positions.labelled_verdict_pairs`, position 'ab' = LLMBar's ``swap = False``);
    {} when a pair lacks an order or a decided label (not LLMBar's setting)."""
    labelled = [p for p in pairs if p["gold"] in ("a", "b")]
    if not labelled or any("ab" not in p or "ba" not in p for p in labelled):
        return {}

    def winner(d):
        return _WINNER.get(d["verdict"]) if d["status"] == "ok" else None

    return llmbar_stats.repository_statistics([1 if p["gold"] == "a" else 2 for p in labelled],
                                              [winner(p["ab"]) for p in labelled], [winner(p["ba"]) for p in labelled])


def repository_figures_of_ratings(pairs: list[dict]) -> dict:
    """LLMBar's statistics.json figures of a Rating protocol from the two raw scores of each
    expert-labelled pair (rows of :func:`judgecal.db.positions.labelled_rating_pairs`), with
    the repository's tie and ``int()`` rules (:func:`judgecal.calibrate.llmbar_stats.winners_from_scores`)."""
    labelled = [p for p in pairs if p["gold"] in ("a", "b")]
    if not labelled:
        return {}
    wins = [llmbar_stats.winners_from_scores(p["raw_a"], p["raw_b"]) for p in labelled]
    return llmbar_stats.repository_statistics([1 if p["gold"] == "a" else 2 for p in labelled],
                                              [w[0] for w in wins], [w[1] for w in wins])


def repository_figures(family: str, judge: str, url: str | None = None) -> dict:
    """LLMBar's statistics.json figures recomputed from what the database holds for ``judge``
    (name or id; pairwise verdicts, or ratings of a Rating protocol) on ``family``."""
    engine = get_engine(url)
    try:
        with session_scope(engine) as s:
            fid = q.family_id(s, family)
            j = q.judge_by_name(s, judge, lambda: q.judges_with_data(s, [fid]), f"with ratings or verdicts in {family}")
            if j.mode == "pairwise":
                return repository_figures_of_verdicts(pq.labelled_verdict_pairs(s, fid, j.id))
            return repository_figures_of_ratings(pq.labelled_rating_pairs(s, fid, j.id))
    finally:
        engine.dispose()


def _position_entry(pairs: list[dict], n_bootstrap: int, seed: int) -> dict:
    """Position and expert-agreement figures of one judge on one family (pairs: rows of
    :func:`judgecal.db.positions.labelled_verdict_pairs`)."""
    both = [p for p in pairs if "ab" in p and "ba" in p]
    pc = position_consistency([_pref(p["ab"]) for p in both], [_pref(p["ba"]) for p in both], n_bootstrap, seed)
    labelled = [p for p in pairs if p["outcome"] is not None]
    out = dict(pc)
    out["n_labelled"] = len(labelled)
    if labelled:
        outcome = np.array([p["outcome"] for p in labelled])
        ab = np.array([_pref(p.get("ab")) for p in labelled])
        ba = np.array([_pref(p.get("ba")) for p in labelled])
        out["expert_agreement"] = expert_agreement_by_order(outcome, ab, ba, n_bootstrap, seed + 2)
        out["kappa"] = {mode: cohen_kappa_binary(outcome, pref) for mode, pref in mode_preferences(ab, ba).items()
                        if mode in ("ab", "ba")}
        rep = repository_figures_of_verdicts(labelled)
        out["llmbar_figures"] = rep or None
    else:
        out["expert_agreement"] = None
        out["kappa"] = None
        out["llmbar_figures"] = None
    return out


@stored("pairwise_summary")
def collect_pairwise(families=None, judge: str | None = None, url: str | None = None, n_bootstrap: int = 1000,
                     seed: int = 0, length_position: bool = False) -> list[dict]:
    """One dict per (task family, judge) with pairwise verdicts: task_family, judge (its label:
    the name, or ``name (id N)`` where judges share a name), judge_id, status_counts,
    n_verdicts, position consistency (:func:`judgecal.calibrate.winrate.position_consistency`
    keys), n_labelled, expert_agreement ({mode: {agreement, ci, n}} for the modes of
    :mod:`judgecal.calibrate.position`), kappa ({"ab", "ba"}: judgecal's Cohen's kappa against
    the experts), llmbar_figures (LLMBar's statistics.json definitions, or None), comparison
    (rank, gap_to_best and its paired CI within the family on the combined agreement;
    :func:`judgecal.calibrate.position.compare_judges`) and length preference
    ("longer_preferred", "n_length_pairs"; lengths in characters). ``families``/``judge``
    narrow the selection (judge: name or id; a judge that shares its name with another - e.g. a
    pointwise one - is found by that name when it is the only one with verdicts).
    ``length_position``: also "length_and_position" per entry (length and position together,
    :func:`length_position_entry`; nested cross-validation, about 2 s per judge and family),
    absent otherwise."""
    engine = get_engine(url)
    out = []
    with session_scope(engine) as s:
        labels = q.judge_labels(s)
        counts = vq.verdict_counts(s)
        wanted = set(q.family_ids(s, families)) if families else None
        chosen = _chosen_judge(s, judge) if judge else None
        names = {fid: s.get(m.TaskFamily, fid).name for fid in counts}
        for fid in sorted(counts, key=names.__getitem__):  # by name: the same order in every database
            if wanted is not None and fid not in wanted:
                continue
            fam = names[fid]
            entries, credit_by = [], {}
            for jrow in sorted((j for j in vq.judges_with_verdicts(s) if labels[j.id] in counts[fid]),
                               key=lambda j: (labels[j.id], j.id)):
                if chosen is not None and jrow.id != chosen.id:
                    continue
                pairs = pq.labelled_verdict_pairs(s, fid, jrow.id)
                lens = vq.verdict_lengths(s, fid, jrow.id)
                entry = _position_entry(pairs, n_bootstrap, seed)
                if not lens and not entry["n_pairs"]:
                    continue
                lp = length_preference([x[0] for x in lens], [x[1] for x in lens], [x[2] for x in lens])
                label = labels[jrow.id]
                entries.append({"task_family": fam, "judge": label, "judge_id": jrow.id,
                                "status_counts": counts[fid][label], "n_verdicts": len(lens), **entry,
                                "longer_preferred": lp["longer_preferred"], "n_length_pairs": lp["n"]})
                if length_position:
                    entries[-1]["length_and_position"] = length_position_entry(pairs, n_bootstrap, seed)
                labelled = [p for p in pairs if p["outcome"] is not None]
                if labelled:
                    prefs = mode_preferences([_pref(p.get("ab")) for p in labelled], [_pref(p.get("ba")) for p in labelled])
                    credit_by[label] = (tuple(p["key"] for p in labelled),
                                        credits([p["outcome"] for p in labelled], prefs["combined"]))
            _compare(entries, credit_by, n_bootstrap, seed + 7)
            # the judge comparison: best first, judges without a comparison last, by label
            out.extend(sorted(entries, key=lambda e: (e["comparison"] is None, (e["comparison"] or {}).get("rank", 0),
                                                      e["judge"])))
    engine.dispose()
    return out


def length_position_entry(pairs: list[dict], n_bootstrap: int = 1000, seed: int = 0) -> dict | None:
    """Length and position together (:func:`judgecal.calibrate.position_length.length_and_position`)
    of one judge on one family from its verdicts on expert-labelled pairs (rows of
    :func:`judgecal.db.positions.labelled_verdict_pairs`; lengths in characters, folds and
    resamples grouped by the item's prompt SHA-256). None with too few pairs in both orders."""
    from judgecal.calibrate.position_length import length_and_position

    labelled = [p for p in pairs if p["outcome"] is not None]
    if not labelled:
        return None
    return length_and_position([p["outcome"] for p in labelled], [_pref(p.get("ab")) for p in labelled],
                               [_pref(p.get("ba")) for p in labelled], [p["len_a"] for p in labelled],
                               [p["len_b"] for p in labelled], [p["key"][0] for p in labelled],
                               n_bootstrap=n_bootstrap, seed=seed, length_unit="characters")


def _chosen_judge(s, judge: str) -> m.Judge:
    """The judge named ``judge`` (name or id); where a name is shared, the one judge of that
    name with pairwise verdicts when there is exactly one (else the ambiguity error)."""
    from judgecal.errors import UsageError

    try:
        return q.judge_by_name(s, judge)
    except UsageError:
        with_verdicts = [j for j in vq.judges_with_verdicts(s) if j.name == judge]
        if len(with_verdicts) == 1:
            return with_verdicts[0]
        raise


def _compare(entries: list[dict], credit_by: dict, n_bootstrap: int, seed: int) -> None:
    """Add "comparison" to each entry: the judge comparison on the pairs every judge of the
    family judged (aligned by content key)."""
    if not credit_by:
        for e in entries:
            e["comparison"] = None
        return
    common = set.intersection(*(set(keys) for keys, _ in credit_by.values()))
    aligned = {}
    for label, (keys, c) in credit_by.items():
        at = {k: i for i, k in enumerate(keys)}
        aligned[label] = np.array([c[at[k]] for k in sorted(common)])
    cmp_ = compare_judges(aligned, n_bootstrap, seed)
    for e in entries:
        row = cmp_["rows"].get(e["judge"])
        e["comparison"] = None if row is None else dict(row, n_pairs=cmp_["n_pairs"], best=cmp_["best"],
                                                        n_judges=len(aligned))
