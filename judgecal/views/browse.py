"""What the web view's overview and ratings pages show (``judgecal serve``): built from
:mod:`judgecal.db.browse` and the existing views (``judgecal stats``'s counts, the stored
calibrations and their staleness as ``fit --list``, ``report`` and ``check`` read them).

Nothing here computes a figure: counts come from SQL, a calibration's figures are those
stored with it (:func:`judgecal.views.fitting.fit_row`), its staleness is
:func:`judgecal.views.fitting.staleness`."""

from __future__ import annotations

import datetime as dt
import math

from judgecal.db import browse
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope
from judgecal.db.positions import judges_in_family
from judgecal.errors import UsageError
from judgecal.views.fitting import fit_row, load_calibrations, staleness
from judgecal.views.stats import collect_stats

RATINGS_PER_PAGE = 50


@stored("overview")
def overview(url: str | None = None) -> dict:
    """{"families": :func:`judgecal.views.stats.collect_stats` (per family: items, responses,
    labels, verbosity pairs, ratings and verdicts by judge and status), "family_judges":
    {family: [{"ref", "label", "kind"}]} (judges with ratings or verdicts there), "judges"
    (:func:`judgecal.db.browse.judges`), "models", "n_models", "status_counts" ({"ratings",
    "verdicts"}: {status: n}), "mc_runs" (count), "calibrations": the newest calibration per
    (family, judge), each {id, task_family, judge, judge_ref, created_at, objective,
    length_unit, tokenizer, gamma, p, n, agreement_cv_raw, agreement_cv_calibrated,
    verbosity_win_rate_raw, verbosity_win_rate_calibrated, decision, recommended, identified,
    stale (True | False | None: freshness unknown)}}."""
    families = collect_stats(url)
    engine = get_engine(url)
    with session_scope(engine) as s:
        # the per-judge and per-status totals, and which judges have ratings or verdicts in each
        # family, are sums over the stats' per-family counts: no second pass over the ratings
        # (counted afresh where a judge was added meanwhile and the stats' labels no longer match)
        id_of = {label: jid for jid, label in q.judge_labels(s).items()}
        per_judge: dict[str, dict[int, int]] | None = {"ratings": {}, "verdicts": {}}
        counts: dict[str, dict[str, int]] = {"ratings": {}, "verdicts": {}}
        for fam in families:
            for kind, by_judge in (("ratings", fam["ratings"]), ("verdicts", fam["pairwise_verdicts"])):
                for label, by_status in by_judge.items():
                    if label not in id_of:
                        per_judge = None
                        break
                    jid = id_of[label]
                    per_judge[kind][jid] = per_judge[kind].get(jid, 0) + sum(by_status.values())
                    for status, n in by_status.items():
                        counts[kind][status] = counts[kind].get(status, 0) + n
                if per_judge is None:
                    break
            if per_judge is None:
                break
        judges = browse.judges(s, counts=per_judge)
        ref_of = {j["id"]: j["ref"] for j in judges}
        models, n_models = browse.models(s)
        n_mc = browse.mc_run_count(s)
        if per_judge is None:
            counts = browse.status_counts(s)
            fam_judges = _family_judges(s, judges)
        else:
            counts = {kind: {k: c[k] for k in sorted(c)} for kind, c in counts.items()}
            fam_judges = _family_judges_from_stats(families, judges)
    engine.dispose()
    chosen = load_calibrations(None, None, "latest", url)
    fresh = staleness(chosen, url)
    cals = []
    for row, fam, jname in chosen:
        f = fit_row(row, fam, jname)
        sel = f.get("selection") or {}
        ident = f.get("identification") or {}
        cals.append({k: f.get(k) for k in ("id", "task_family", "judge", "created_at", "objective", "length_unit",
                                           "tokenizer", "gamma", "p", "n", "agreement_cv_raw",
                                           "agreement_cv_calibrated", "verbosity_win_rate_raw",
                                           "verbosity_win_rate_calibrated")}
                    | {"judge_ref": ref_of.get(row.judge_id, f"id:{row.judge_id}"), "decision": sel.get("decision"),
                       "recommended": sel.get("recommended"), "identified": ident.get("identified") if ident else None,
                       "stale": fresh[row.id]})
    return {"families": families, "family_judges": fam_judges, "judges": judges, "models": models,
            "n_models": n_models, "status_counts": counts, "mc_runs": n_mc, "calibrations": cals}


def _family_judges_from_stats(families: list[dict], judges: list[dict]) -> dict[str, list[dict]]:
    """:func:`_family_judges` read off :func:`judgecal.views.stats.collect_stats`' counts (the
    same judges: both count a verdict in the family of its answer a, a rating in its answer's)."""
    by_label = {j["label"]: j for j in judges}
    out = {}
    for fam in families:
        pair, rate = set(fam["pairwise_verdicts"]), set(fam["ratings"])
        found = sorted((by_label[label] for label in pair | rate), key=lambda j: (j["name"], j["id"]))
        out[fam["task_family"]] = [{"ref": j["ref"], "label": j["label"], "name": j["name"],
                                    "kind": "pairwise" if j["label"] in pair else "pointwise"} for j in found]
    return out


def _family_judges(s, judges: list[dict]) -> dict[str, list[dict]]:
    ref_of = {j["id"]: j["ref"] for j in judges}
    label = {j["id"]: j["label"] for j in judges}
    out = {}
    for name in browse.family_names(s):
        out[name] = [{"ref": ref_of[j.id], "label": label[j.id], "name": j.name, "kind": kind}
                     for j, kind in judges_in_family(s, q.family_id(s, name))]
    return out


def family_judges(url: str | None = None, *, model: str | None = None) -> dict[str, list[dict]]:
    """{family: [{"ref", "label", "name", "kind": "pointwise" | "pairwise"}]}: the judges with ratings or
    pairwise verdicts on each family's answers (:func:`judgecal.db.positions.judges_in_family`).
    ``model``: only the family and judge pairs whose judge audit holds an answer of that model
    (exact name; :func:`judgecal.db.browse.model_audit_scope`), families left without one dropped."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        judges = browse.judges(s)
        out = _family_judges(s, judges)
        if model is not None:
            every, pairs = browse.model_audit_scope(s, model)
            fam_id = {name: q.family_id(s, name) for name in out}
            id_of = {j["ref"]: j["id"] for j in judges}
            out = {fam: [j for j in js if fam_id[fam] in every or (fam_id[fam], id_of[j["ref"]]) in pairs]
                   for fam, js in out.items()}
            out = {fam: js for fam, js in out.items() if js}
    engine.dispose()
    return out


def calibrations(url: str | None = None) -> list[dict]:
    """Every stored calibration, newest first, as ``fit --list`` shows them
    (:func:`judgecal.views.fitting.fit_row`), each with ``judge_ref`` (what a URL names its
    judge by)."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        judges = browse.judges(s)
    engine.dispose()
    from judgecal.views.fitting import list_fits

    ref_of = {j["label"]: j["ref"] for j in judges} | {j["name"]: j["ref"] for j in judges}
    rows = list_fits(None, None, url)
    for r in rows:
        r["judge_ref"] = ref_of.get(r["judge"], r["judge"])
    return sorted(rows, key=lambda r: -r["id"])


def choices(url: str | None = None) -> dict:
    """What the filter forms offer: {"families": names, "judges": :func:`judgecal.db.browse.judges`
    with ``ratings`` and ``verdicts`` 1 or 0 (whether the judge has any: the forms offer the judges
    that have ratings, and counting them is a pass over every row), "statuses": the rating statuses}."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        out = {"families": browse.family_names(s), "judges": browse.judges(s, counts=browse.judge_presence(s)),
               "statuses": list(m.RATING_STATUSES)}
    engine.dispose()
    return out


def _day(value: dt.date | None) -> dt.datetime | None:
    if value is None:
        return None
    return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)


def ratings(url: str | None = None, *, family: str | None = None, judge: str | None = None, model: str | None = None,
            status: str | None = None, score_min: float | None = None, score_max: float | None = None,
            since: dt.date | None = None, until: dt.date | None = None, page: int = 1,
            per_page: int = RATINGS_PER_PAGE, index: browse.RatingIndex | None = None) -> dict:
    """One page of ratings: {"rows": :func:`judgecal.db.browse.rating_page` rows, "total",
    "page", "pages", "per_page"}. ``since``/``until``: days (UTC) of the rating's creation,
    both included. ``index``: a :func:`rating_index` of the same data, where the caller kept
    one: the page is then cut from it and only its rows are read (the same rows, in code-point
    order on every database). Raises UsageError (unknown status, empty score range, page out
    of range), NotFoundError (unknown family or judge)."""
    if status is not None and status not in m.RATING_STATUSES:
        raise UsageError(f"status must be one of {', '.join(m.RATING_STATUSES)}, got {status!r}")
    for name, v in (("score_min", score_min), ("score_max", score_max)):
        if v is not None and not math.isfinite(v):
            raise UsageError(f"{name} must be a finite number")
    if score_min is not None and score_max is not None and score_min > score_max:
        raise UsageError(f"score_min {score_min:g} is above score_max {score_max:g}")
    if since is not None and until is not None and since > until:
        raise UsageError(f"since {since} is after until {until}")
    check_page(page, per_page)
    engine = get_engine(url)
    with session_scope(engine) as s:
        f = browse.RatingFilter(
            family_id=q.family_id(s, family) if family else None,
            judge_id=q.judge_by_name(s, judge, lambda: q.judges_with_data(s, [q.family_id(s, family)] if family else None),
                                     "with ratings" + (f" in {family}" if family else "")).id if judge else None,
            model=model or None, status=status, score_min=score_min, score_max=score_max, since=_day(since),
            until=_day(until + dt.timedelta(days=1)) if until is not None and until < dt.date.max else None)
        if index is None:
            rows, total = browse.rating_page(s, f, limit=per_page, offset=(page - 1) * per_page)
        else:
            chosen = index.select(f)
            total = len(chosen)
            _, span = page_span(total, page, per_page, "ratings")
            rows = browse.rating_rows(s, [int(i) for i in index.id[chosen[span]]])
    engine.dispose()
    pages, _ = page_span(total, page, per_page, "ratings")
    return {"rows": rows, "total": total, "page": page, "pages": pages, "per_page": per_page}


def rating_index_bytes_at_most(url: str | None = None) -> int:
    """An upper bound of :func:`rating_index`'s array bytes, by one index probe
    (:func:`judgecal.db.browse.rating_index_bytes_at_most`)."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        out = browse.rating_index_bytes_at_most(s)
    engine.dispose()
    return out


def rating_index(url: str | None = None) -> browse.RatingIndex:
    """Every rating's filter columns in content order (:class:`judgecal.db.browse.RatingIndex`):
    what ``judgecal serve`` keeps to answer any filter and page of its ratings list."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        out = browse.rating_index(s)
    engine.dispose()
    return out


def baselines(url: str | None = None, families=None) -> list[dict]:
    """The models that win rates can be read against: :func:`judgecal.db.browse.baseline_models`
    (of the task families ``families`` when given; NotFoundError naming one that does not exist)."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        out = browse.baseline_models(s)
        if families:
            q.families_exist(s, families)
            out = [b for b in out if b["task_family"] in families]
    engine.dispose()
    return out


def page_span(total: int, page: int, per_page: int, what: str) -> tuple[int, slice]:
    """(number of pages, the slice of page ``page``) of ``total`` rows, ``per_page`` a page
    (at least one page, even of nothing). Raises UsageError for a page past the last."""
    pages = max(1, math.ceil(total / per_page))
    if page > pages:
        raise UsageError(f"page {page} is past the last page ({pages}) of {total} {what}")
    return pages, slice((page - 1) * per_page, page * per_page)


def check_page(page: int, per_page: int) -> None:
    """Refuse a page number below 1 or a page size outside [1, db.browse.MAX_PAGE]
    (UsageError, one line): every paginated view asks the same."""
    if not 1 <= per_page <= browse.MAX_PAGE:
        raise UsageError(f"per_page must be between 1 and {browse.MAX_PAGE}, got {per_page}")
    if page < 1:
        raise UsageError(f"page must be 1 or more, got {page}")
