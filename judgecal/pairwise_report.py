"""The pairwise-judge section of ``judgecal report``: per task family and judge with pairwise
verdicts, the judge's position consistency (pairs judged in both orders) and its length
preference on pairs (docs/report.md)."""

from __future__ import annotations

from judgecal.calibrate.winrate import length_preference, position_consistency
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db import verdicts as vq
from judgecal.db.engine import get_engine, session_scope


def collect_pairwise(families=None, judge: str | None = None, url: str | None = None, n_bootstrap: int = 1000,
                     seed: int = 0) -> list[dict]:
    """One dict per (task family, judge) with pairwise verdicts: task_family, judge, n_verdicts,
    position consistency (:func:`judgecal.calibrate.winrate.position_consistency` keys) and
    length preference ("longer_preferred", "n_length_pairs"; lengths in characters).
    ``families``/``judge`` narrow the selection (judge: name or id)."""
    engine = get_engine(url)
    out = []
    with session_scope(engine) as s:
        counts = vq.verdict_counts(s)
        wanted = set(q.family_ids(s, families)) if families else None
        chosen = q.judge_by_name(s, judge) if judge else None  # by name or id: two judges may share a name
        judge_name = chosen.name if chosen else None
        for fid in sorted(counts):
            if wanted is not None and fid not in wanted:
                continue
            fam = s.get(m.TaskFamily, fid).name
            for jname in sorted(counts[fid]):
                if judge_name and jname != judge_name:
                    continue
                for jrow in s.query(m.Judge).filter(m.Judge.name == jname).order_by(m.Judge.id):
                    if chosen is not None and jrow.id != chosen.id:
                        continue
                    pairs = vq.both_order_pairs(s, [fid], jrow.id)
                    pc = position_consistency([p["ab"] for p in pairs], [p["ba"] for p in pairs], n_bootstrap, seed)
                    lens = vq.verdict_lengths(s, fid, jrow.id)
                    if not lens and not pc["n_pairs"]:
                        continue
                    lp = length_preference([x[0] for x in lens], [x[1] for x in lens], [x[2] for x in lens])
                    out.append({"task_family": fam, "judge": jname, "judge_id": jrow.id,
                                "status_counts": counts[fid][jname], "n_verdicts": len(lens),
                                **pc, "longer_preferred": lp["longer_preferred"], "n_length_pairs": lp["n"]})
    engine.dispose()
    return out
