"""JudgeBench (ScalerLab/JudgeBench): its pairs and the reward-model scores of its outputs.

Two kinds of JSONL files, one object a line, told apart by their fields:

* the data set, ``data/dataset=judgebench,response_model=<M>.jsonl``: ``pair_id``,
  ``original_id``, ``source`` (e.g. ``mmlu-pro-law``, ``livebench-math``), ``question``,
  ``response_model``, ``response_A``, ``response_B``, ``label`` (``"A>B"``, ``"B>A"``; ``"A=B"``
  is read as a tie);
* a judge's outputs, ``outputs/dataset=judgebench,...,judge_name=<J>,judge_model=<X>.jsonl``: the
  same fields plus ``judge_name`` and ``judgments``. For ``judge_name == "reward_model"`` each
  judgment holds ``judgment.scores`` = [score of the response shown first, of the second]; the
  first judgment shows A then B, the second B then A (JudgeBench's ``run_judge.py`` swaps the
  order). They become pointwise ratings of judge ``judgment.judge_model`` (samples 0 and 1), on
  an **unbounded** scale: reward-model scores have no fixed range, so the judge is stored with
  scale (-inf, +inf) and a calibration of it clips nothing. Outputs of LLM judges (only a
  ``decision`` per judgment, e.g. ``arena_hard``) are pairwise verdicts; they are counted as
  skipped here, not silently dropped.

Every pair becomes an item under task family ``judgebench`` (or the one given), two responses by
``response_model`` and one pairwise expert label (annotator ``judgebench-gold``: JudgeBench's
labels come from the ground truth of the source benchmark).
"""

from __future__ import annotations

import math
from pathlib import Path

from judgecal.importers.records import Fields, ImportBatch, JudgeSpec, RespRef, read_jsonl

LABELS = {"a>b": "a", "b>a": "b", "a=b": "tie"}
UNBOUNDED = (-math.inf, math.inf)


def parse(paths: list[Path], family: str | None = None) -> ImportBatch:
    """Parse JudgeBench data and/or output files into one batch (family default ``judgebench``).
    Raises InputError naming FILE:LINE and the field for a bad record."""
    fam = family or "judgebench"
    batch = ImportBatch(source="judgebench")
    judges: dict[str, JudgeSpec] = {}
    seen_labels: set[tuple] = set()
    for path in [Path(p) for p in paths]:
        for line, obj in read_jsonl(path):
            f = Fields(obj, str(path), line)
            prompt = f.text("question")
            model = f.text("response_model", allow_empty=False)
            a = batch.add_response(RespRef(fam, prompt, model, f.text("response_A")))
            b = batch.add_response(RespRef(fam, prompt, model, f.text("response_B")))
            key = (a, b)
            if key not in seen_labels:  # the data file and every output file repeat the label
                seen_labels.add(key)
                batch.pair_labels.append((a, b, f.choice("label", LABELS), "judgebench-gold", batch.source))
            if not f.has("judgments"):
                continue
            judgments = obj["judgments"]
            if not isinstance(judgments, list) or not judgments:
                raise f.fail("field 'judgments' must be a non-empty list")
            if f.text("judge_name", required=False) != "reward_model":
                batch.skip(f"judge {obj.get('judge_name')!r}: pairwise decisions, no per-response score "
                           f"(only reward-model outputs are imported as ratings)", f"{path}:{line}")
                continue
            for i, j in enumerate(judgments[:2]):
                jd = j.get("judgment") if isinstance(j, dict) else None
                scores = jd.get("scores") if isinstance(jd, dict) else None
                if not isinstance(scores, list) or len(scores) != 2:
                    raise f.fail(f"judgments[{i}].judgment.scores must be a list of two numbers")
                name = str(jd.get("judge_model") or "reward_model")
                judge = judges.get(name)
                if judge is None:
                    judge = judges[name] = JudgeSpec(name=name, model=name, endpoint="import:judgebench",
                                                     prompt_name="judgebench/reward_model",
                                                     scale_min=UNBOUNDED[0], scale_max=UNBOUNDED[1])
                first, second = (a, b) if i == 0 else (b, a)
                for ref, value, where in ((first, scores[0], 0), (second, scores[1], 1)):
                    row = {"judge": judge, "response": ref, "sample_index": i, "raw_output": str(value)}
                    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                    if ok:
                        batch.ratings.append(dict(row, status="ok", score=float(value), error=None))
                    else:
                        batch.ratings.append(dict(row, status="unparsed", score=None,
                                                  error=f"judgments[{i}].judgment.scores[{where}] is {value!r}"))
    return batch
