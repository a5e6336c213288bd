"""The report's Bradley-Terry section (issue 34 item 6): per task family and judge with pairwise
verdicts, the style-controlled Bradley-Terry board of ``judgecal bt --control both`` (the style
coefficients with CIs, the controlled board beside the uncontrolled one with rank changes and
flags), built by :func:`judgecal.views.btboard.build_bt_board`."""

from __future__ import annotations

import math

from sqlalchemy import select

from judgecal.errors import JudgecalError, NotFoundError
from judgecal.progress import no_step

#: the section's style control and length unit: words need no tokenizer (``judgecal bt``'s
#: default, tokens, needs the pulled SmolLM2 tokenizer and stores token lengths)
CONTROL = "both"
LENGTH_UNIT = "words"
#: the section's bootstrap: the report's ``--bootstrap``, at most this many item resamples (a team's
#: database holds hundreds of family/judge pairs with verdicts: the 175 boards of the tests' team
#: database, 174 of them LLMBar's two outputs, took 50 s with 50 resamples on 2 busy cores;
#: ``judgecal bt --bootstrap N`` gives more for one board)
MAX_BOOTSTRAP = 200


def collect_bt(families=None, judge: str | None = None, url: str | None = None, *, n_bootstrap: int = 1000,
               seed: int = 0, step=None, pairs: set[tuple[str, int]] | None = None) -> dict | None:
    """{"control", "length_unit", "boards": [board of :func:`build_bt_board` per task family and
    judge with usable pairwise verdicts, by family then judge, non-finite figures as None],
    "notes": [one line per board not built, saying why]}, or None where no family and judge
    (of ``families`` / ``judge``: a judge by name, model or id) has pairwise verdicts. Each
    board: ``control`` :data:`CONTROL`, lengths in :data:`LENGTH_UNIT`, ``n_bootstrap`` item
    resamples (at most :data:`MAX_BOOTSTRAP`) with ``seed``; its baseline the one the verdicts
    name, else (verdicts naming none: LLMBar's output_1 / output_2) the model with the most
    battles, which a note on the board names (the style coefficients do not depend on the
    anchor). ``pairs``: {(task family name, judge id)} to keep (a report of calibration ids:
    their own families and judges, not every board of the database); None: all."""
    from judgecal.db import battles as bq
    from judgecal.db import models as m
    from judgecal.db import queries as q
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.views.btboard import build_bt_board

    step = step or no_step
    engine = get_engine(url)
    try:
        with session_scope(engine) as s:
            scopes = bq.verdict_scopes(s)
            names = dict(s.execute(select(m.TaskFamily.id, m.TaskFamily.name)).all())
            if families:
                scopes = [x for x in scopes if names[x[0]] in set(families)]
            if pairs is not None:
                scopes = [x for x in scopes if (names[x[0]], x[1]) in pairs]
            if judge and scopes:
                try:
                    jid = q.judge_by_name(s, judge, {x[1] for x in scopes}, "with pairwise verdicts").id
                except NotFoundError:
                    return None
                scopes = [x for x in scopes if x[1] == jid]
            refs = {j: q.judge_reference(s, s.get(m.Judge, j)) for j in {x[1] for x in scopes}}
            labels = q.judge_labels(s)
    finally:
        engine.dispose()
    if not scopes:
        return None
    out: dict = {"control": CONTROL, "length_unit": LENGTH_UNIT, "boards": [], "notes": []}
    for fid, jid, _ in sorted(scopes, key=lambda x: (names[x[0]], labels[x[1]])):
        fam = names[fid]
        step(f"Bradley-Terry board with style control ({fam}, judge {labels[jid]})")
        kw = dict(n_bootstrap=min(n_bootstrap, MAX_BOOTSTRAP), seed=seed, control=CONTROL, length_unit=LENGTH_UNIT)
        try:
            board = build_bt_board([fam], refs[jid], None, url, any_baseline=True, **kw)
        except JudgecalError as exc:
            out["notes"].append(f"Bradley-Terry board of {fam} (judge {labels[jid]}): not built: "
                                f"{str(exc).splitlines()[0]}")
            continue
        out["boards"].append(_finite(board))
    return out


def _finite(x):
    """``x`` with every non-finite float as None (the report's JSON is strict, as ``--format json``)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x
