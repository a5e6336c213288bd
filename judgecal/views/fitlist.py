"""The stored calibrations: which are stale (:func:`staleness`), the list (:func:`list_fits`),
the ones a command applies (:func:`load_calibrations`, :func:`refuse_out_of_scope`). Split out of
:mod:`judgecal.views.fitting`, which re-exports these names."""

from __future__ import annotations

from sqlalchemy import select

from judgecal.calibrate.fingerprint import fingerprint
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db.engine import get_engine, session_scope
from judgecal.db.fitdata import fingerprint_records, load_family
from judgecal.errors import UsageError


def staleness(chosen: list[tuple], url: str | None = None) -> dict[int, bool | None]:
    """{calibration id: stale} of calibrations (as :func:`load_calibrations` returns them):
    True when the ratings, labels, lengths or verbosity pairs the calibration was fitted on
    (its ``data["fingerprint"]``) have changed since, False when they are the same, None when
    the calibration predates fingerprints (freshness unknown). The data are read again exactly
    as the fit read them (family, judge, length unit and tokenizer, verbosity family); token
    lengths are never computed here (one missing since the fit is a change)."""
    out: dict[int, bool | None] = {}
    todo = [(row, fam) for row, fam, _ in chosen if row.id not in out]
    if not todo:
        return out
    engine = get_engine(url)
    with session_scope(engine) as s:
        for row, fam in todo:
            data = row.data or {}
            stored = data.get("fingerprint")
            if not stored:
                out[row.id] = None
                continue
            vname = data.get("verbosity_family") or fam
            vfam_id = None
            if vname != fam:
                vfam_id = s.scalar(select(m.TaskFamily.id).where(m.TaskFamily.name == vname))
                if vfam_id is None:  # the verbosity family is gone: the data changed
                    out[row.id] = True
                    continue
            from judgecal.views.fitting import fitted_summary

            fs, fk = fitted_summary(row)
            rows = load_family(s, row.task_family_id, row.judge_id, length_unit=row.length_unit,
                               tokenizer=row.tokenizer, verbosity_family_id=vfam_id, summary=fs, risk_k=fk)
            out[row.id] = fingerprint(fingerprint_records(rows)) != stored
    engine.dispose()
    return out


STALE_TEXT = ("stale: the ratings, labels or lengths this calibration was fitted on have changed since "
              "(refit with judgecal fit)")
UNKNOWN_FRESHNESS_TEXT = ("freshness unknown: this calibration was stored before judgecal recorded the fingerprint "
                          "of its data (refit with judgecal fit to record one)")


def _fit_query(family: str | None, judge: str | None, s):
    stmt = (
        select(m.Calibration, m.TaskFamily.name, m.Judge.name)
        .join(m.TaskFamily, m.TaskFamily.id == m.Calibration.task_family_id)
        .join(m.Judge, m.Judge.id == m.Calibration.judge_id)
        .order_by(m.Calibration.id)
    )
    fid = q.family_id(s, family) if family else None
    if fid is not None:
        stmt = stmt.where(m.Calibration.task_family_id == fid)
    if judge:  # a name several judges share: the one with a calibration (of the family)
        fitted = select(m.Calibration.judge_id).distinct()
        if fid is not None:
            fitted = fitted.where(m.Calibration.task_family_id == fid)
        among = set(s.scalars(fitted))
        where = "with a calibration" + (f" of {family}" if family else "")
        if not among:  # no judge of the name has a calibration there: the one with data there is meant
            among = lambda: q.judges_with_data(s, [fid] if fid is not None else None)  # noqa: E731
            where = "with ratings or verdicts" + (f" in {family}" if family else "")
        jrow = q.judge_by_name(s, judge, among, where)
        stmt = stmt.where(m.Calibration.judge_id == jrow.id)
    return stmt


def list_fits(family: str | None = None, judge: str | None = None, url: str | None = None) -> list[dict]:
    """Every stored calibration (oldest first), optionally of one family and/or judge."""
    engine = get_engine(url)
    with session_scope(engine) as s:
        from judgecal.views.fitting import fit_row

        out = [fit_row(row, fam, jname) for row, fam, jname in s.execute(_fit_query(family, judge, s))]
    engine.dispose()
    return out


def refuse_out_of_scope(chosen: list[tuple], families=None, judge: str | None = None, url: str | None = None) -> None:
    """Refuse calibrations named by id that are not of ``judge`` (a name, model or id, as
    ``--judge`` takes it) or, when ``families`` is given, not of one of those task families.

    ``chosen``: (Calibration row, family name, judge name) as :func:`load_calibrations` returns.
    Raises UsageError (one line naming the calibration, its family or judge and what was asked),
    NotFoundError for an unknown judge or family."""
    if not chosen or (not judge and not families):
        return
    engine = get_engine(url)
    with session_scope(engine) as s:
        # a shared name resolves to the judge of the calibrations named
        jrow = q.judge_by_name(s, str(judge), {row.judge_id for row, _, _ in chosen}) if judge else None
        fam_ids = set(q.family_ids(s, families)) if families else None
        jname = jrow.name if jrow is not None else None
    engine.dispose()
    for row, fam, jud in chosen:
        if jrow is not None and row.judge_id != jrow.id:
            ids = (f" (id:{row.judge_id})", f" (id:{jrow.id})") if jud == jname else ("", "")  # a shared name
            raise UsageError(f"calibration {row.id} is of judge {jud!r}{ids[0]}, not {jname!r}{ids[1]}")
        if fam_ids is not None and row.task_family_id not in fam_ids:
            raise UsageError(f"calibration {row.id} is of task family {fam!r}, not of {', '.join(map(repr, families))}")


def load_calibrations(families=None, judge: str | None = None, calibration="latest", url: str | None = None) -> list[tuple]:
    """(Calibration row, family name, judge name) to report: the newest per (family, judge),
    or the rows named by ``calibration`` (an id, or a list of ids; ``"latest"`` = the newest).
    With ids, ``families`` and ``judge`` do not filter: the caller decides what to do with a
    calibration of another family (see :func:`judgecal.views.reporting.collect_entries`)."""
    ids = [calibration] if isinstance(calibration, (str, int)) else list(calibration or ["latest"])
    engine = get_engine(url)
    with session_scope(engine) as s:
        if ids != ["latest"]:
            out = []
            for cid in ids:
                if str(cid) == "latest" or not str(cid).isdigit():
                    raise UsageError(f"--calibration must be ids or 'latest' alone, got {cid!r}")
                found = s.execute(_fit_query(None, None, s).where(m.Calibration.id == int(cid))).all()
                if not found:
                    from judgecal.errors import NotFoundError

                    raise NotFoundError(f"no calibration with id {cid} (see `judgecal fit --list`)")
                out.append(tuple(found[0]))
            engine.dispose()
            return out
        newest: dict[tuple[int, int], tuple] = {}
        for fam in families or [None]:
            for row, fname, jname in s.execute(_fit_query(fam, judge, s)):
                newest[(row.task_family_id, row.judge_id)] = (row, fname, jname)
    engine.dispose()
    return sorted(newest.values(), key=lambda t: (t[1], t[2]))
