"""Write the calibrations of an :class:`~judgecal.importers.records.ImportBatch` (``import
jsonl|csv --kind calibrations``: :mod:`judgecal.importers.calibrations`).

A calibration's natural key is (task family, judge, ``created_at``): one stored with the same
values is counted as already stored (``Writer.already["calibration"]``), never added twice;
one stored with other values is refused at FILE:LINE (an import never changes a stored value).
A family or judge the database does not hold yet is created (as other imports create them)."""

from __future__ import annotations

from sqlalchemy import select

from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.importers.calibrations import VALUE_FIELDS, canonical_json
from judgecal.importers.records import ImportBatch

_JSON = ("params", "metrics", "data")


def _values(get) -> tuple:
    return tuple(canonical_json(get(k)) if k in _JSON else get(k) for k in VALUE_FIELDS)


def write_calibrations(writer, batch: ImportBatch) -> None:
    """Insert ``batch.calibrations`` through ``writer`` (a :class:`judgecal.db.ingest.Writer`:
    its session, its family and judge lookups, its ``added`` and ``already`` counts, which gain
    a ``calibration`` entry). Raises InputError at FILE:LINE for a calibration stored with other
    values."""
    session = writer.session
    writer.added.setdefault("calibration", 0)
    writer.already.setdefault("calibration", 0)
    C = m.Calibration
    for i, rec in enumerate(batch.calibrations):
        fam = rec["task_family"]
        fid = writer.fam_ids.get(fam)
        if fid is None:
            fid = session.scalar(select(m.TaskFamily.id).where(m.TaskFamily.name == fam))
            if fid is None:
                writer._count("task_family", q.insert_ignore(session, m.TaskFamily, [
                    {"name": fam, "l_ref": None, "created_at": m.utcnow()}]))
                fid = q.family_id(session, fam)
            writer.fam_ids[fam] = fid
        jid = writer._judge_id(rec["judge"])
        given = _values(rec.get)
        stored = next((row for row in session.scalars(select(C).where(C.task_family_id == fid, C.judge_id == jid))
                       if m.as_utc(row.created_at) == rec["created_at"]), None)
        if stored is not None:
            have = _values(lambda k: getattr(stored, k))
            if have != given:
                writer._refuse(batch, "calibrations", i, f"calibration (fitted at {m.iso_utc(rec['created_at'])})",
                               VALUE_FIELDS, have, given, None)
            writer.already["calibration"] += 1
            continue
        spec = rec["judge"]
        session.add(C(task_family_id=fid, judge_id=jid, created_at=rec["created_at"], scale_min=spec.scale_min,
                      scale_max=spec.scale_max, **{k: rec[k] for k in VALUE_FIELDS}))
        session.flush()
        writer._count("calibration", 1)
