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

Refused with FILE:LINE (nothing is written): a score that is not a finite JSON number of at most
1e15 in magnitude (NaN, Infinity, null, true/false, any string: JudgeBench writes numbers); a
``pair_id`` read again with another label or other texts (the message names the earlier line);
a response scored twice by one judge in one presentation order with two values; and (at import
time, :func:`refuse_judge_clashes`) a ``judge_model`` that names an existing judge of another
kind (e.g. LLMBar's 0-10 ``GPT-4``). Warned and counted: exact repeats of a record within one
file (kept once), judgments without ``judge_model`` (filed under judge ``reward_model``), and
a file without any record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

from judgecal.errors import InputError
from judgecal.importers.records import (NAME_MAX, Fields, ImportBatch, JudgeSpec, RespRef, check_family, merge,
                                        read_jsonl)

LABELS = {"a>b": "a", "b>a": "b", "a=b": "tie"}
UNBOUNDED = (-math.inf, math.inf)
#: Largest |score| accepted (as the generic importers' numbers): the fits square score differences.
MAX_ABS_SCORE = 1e15
DEFAULT_JUDGE = "reward_model"


def _score(f: Fields, value, where: str) -> float:
    """A reward-model score: a JSON number, finite, |value| <= :data:`MAX_ABS_SCORE`; anything else
    (NaN, Infinity, null, true/false, a string, even "1.5") is an InputError naming FILE:LINE."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise f.fail(f"{where} must be a number, got {json.dumps(value)[:40]}")
    if not math.isfinite(value) or abs(value) > MAX_ABS_SCORE:
        raise f.fail(f"{where} must be a finite number of at most {MAX_ABS_SCORE:g} in magnitude, got {value!r}")
    return float(value)


def parse(paths: list[Path], family: str | None = None) -> ImportBatch:
    """Parse JudgeBench data and/or output files into one batch (family default ``judgebench``):
    :func:`batches` merged."""
    return merge("judgebench", batches(paths, family))


def batches(paths: list[Path], family: str | None = None) -> Iterator[ImportBatch]:
    """One ImportBatch per file (family default ``judgebench``), each with its file and lines
    for FILE:LINE messages; the checks span the files (a pair is checked against every file).

    A pair (``pair_id``, else its question and responses) read twice with another label or other
    texts is an InputError naming both FILE:LINE; a record repeated within one file is kept once
    and counted in a warning (the data file and each output file legitimately repeat every pair).
    A reward-model score that is not a finite JSON number is an InputError (:func:`_score`); a
    judgment without ``judge_model`` is filed under judge ``reward_model`` and counted in a
    warning; a file without a record is a warning. Raises InputError naming FILE:LINE and the field."""
    check_family(family)
    fam = family or "judgebench"
    judges: dict[str, JudgeSpec] = {}
    pairs: dict[str, tuple[str, tuple, str]] = {}  # pair key -> (label, texts, FILE:LINE first seen)
    seen_labels: dict[tuple, tuple[str, str]] = {}  # (a, b) -> (label, FILE:LINE)
    rated: dict[tuple, tuple[float, str]] = {}  # (judge, response, sample) -> (score, FILE:LINE)
    no_model = 0
    out: list[ImportBatch] = []
    for path in [Path(p) for p in paths]:
        batch = ImportBatch(source="judgebench", files=[str(path)], origin=str(path))
        label_at, rating_at = batch.at.setdefault("pair_labels", []), batch.at.setdefault("ratings", [])
        n_records = repeats = 0
        in_file: dict[str, dict] = {}  # pair key -> its first record in this file
        for line, obj in read_jsonl(path):
            n_records += 1
            f = Fields(obj, str(path), line)
            here = f"{path}:{line}"
            prompt = f.text("question")
            model = f.text("response_model", allow_empty=False, max_len=NAME_MAX)
            text_a, text_b = f.text("response_A"), f.text("response_B")
            label = f.choice("label", LABELS)
            pid = obj.get("pair_id")
            key = json.dumps(["pair_id", pid] if pid is not None else ["texts", prompt, text_a, text_b])
            texts = (prompt, model, text_a, text_b)
            if key in pairs:
                old_label, old_texts, where = pairs[key]
                what = f"pair_id {pid!r}" if pid is not None else "this pair"
                if old_label != label:
                    raise f.fail(f"{what} has label {obj.get('label')!r} here but another label at {where}")
                if old_texts != texts:
                    raise f.fail(f"{what} has another question, response_model or responses than at {where}")
            else:
                pairs[key] = (label, texts, here)
            if key in in_file:
                if obj == in_file[key]:
                    repeats += 1
                    continue  # an exact repeat within the file: kept once
            else:
                in_file[key] = obj
            a = batch.add_response(RespRef(fam, prompt, model, text_a))
            b = batch.add_response(RespRef(fam, prompt, model, text_b))
            if (a, b) not in seen_labels:  # the data file and every output file repeat the label
                seen_labels[(a, b)] = (label, here)
                batch.pair_labels.append((a, b, label, "judgebench-gold", batch.source))
                label_at.append(line)
            elif seen_labels[(a, b)][0] != label:  # another pair_id, the same question and responses
                raise f.fail(f"this question and these responses have label {obj.get('label')!r} here but another "
                             f"label at {seen_labels[(a, b)][1]}")
            if not f.has("judgments"):
                continue
            judgments = obj["judgments"]
            if not isinstance(judgments, list) or not judgments:
                raise f.fail("field 'judgments' must be a non-empty list")
            if f.text("judge_name", required=False) != "reward_model":
                batch.skip(f"judge {obj.get('judge_name')!r}: pairwise decisions, no per-response score "
                           f"(only reward-model outputs are imported as ratings)", here)
                continue
            if len(judgments) > 2:  # JudgeBench writes the pair and its swap: a third was silently dropped
                batch.skip("reward-model record with more than two judgments (the pair and its swapped order): "
                           "its judgments after the second are not imported", here)
            for i, j in enumerate(judgments[:2]):
                jd = j.get("judgment") if isinstance(j, dict) else None
                scores = jd.get("scores") if isinstance(jd, dict) else None
                if not isinstance(scores, list) or len(scores) != 2:
                    raise f.fail(f"judgments[{i}].judgment.scores must be a list of two numbers")
                values = [_score(f, v, f"judgments[{i}].judgment.scores[{k}]") for k, v in enumerate(scores)]
                name = jd.get("judge_model")
                if name is None or (isinstance(name, str) and not name.strip()):
                    no_model += 1
                    name = DEFAULT_JUDGE
                elif not isinstance(name, str):
                    raise f.fail(f"judgments[{i}].judgment.judge_model must be a string, got {json.dumps(name)[:40]}")
                judge = judges.get(name)
                if judge is None:
                    judge = judges[name] = JudgeSpec(name=name, model=name, endpoint="import:judgebench",
                                                     prompt_name="judgebench/reward_model",
                                                     scale_min=UNBOUNDED[0], scale_max=UNBOUNDED[1])
                first, second = (a, b) if i == 0 else (b, a)
                for ref, value in ((first, values[0]), (second, values[1])):
                    rkey = (name, ref, i)
                    if rkey in rated:
                        old, where = rated[rkey]
                        if old != value:
                            raise f.fail(f"judge {name!r} scores this response {value!r} here but {old!r} at {where} "
                                         f"(same pair, same presentation order)")
                        continue
                    rated[rkey] = (value, here)
                    batch.ratings.append({"judge": judge, "response": ref, "sample_index": i, "raw_output": repr(value),
                                          "status": "ok", "score": value, "error": None})
                    rating_at.append(line)
        if n_records == 0:
            batch.warnings.append(f"{path}: no record (an empty file): nothing imported from it")
        if repeats:
            batch.warnings.append(f"{path}: {repeats} records repeat a pair already read from this file "
                                  f"exactly: kept once")
        out.append(batch)
    if no_model:
        out[-1].warnings.append(f"{no_model} reward-model judgments have no judgment.judge_model: their scores were "
                                f"filed under judge {DEFAULT_JUDGE!r}")
    yield from out


def refuse_judge_clashes(batch: ImportBatch | list[ImportBatch], url: str | None = None) -> None:
    """Refuse a reward model whose name is already taken by a different judge (another scale,
    endpoint or prompt): importing it would create a second judge of that name, and ``--judge
    NAME`` would then be ambiguous everywhere. Raises InputError naming the existing judge."""
    specs = {r["judge"] for b in (batch if isinstance(batch, list) else [batch]) for r in b.ratings}
    if not specs:
        return
    from sqlalchemy import select

    from judgecal.db import models as m
    from judgecal.db.engine import get_engine, session_scope

    engine = get_engine(url)
    try:
        with session_scope(engine) as s:
            for spec in sorted(specs, key=lambda j: j.name):
                for j in s.scalars(select(m.Judge).where(m.Judge.name == spec.name).order_by(m.Judge.id)):
                    same = (j.endpoint == spec.endpoint and j.prompt_name == spec.prompt_name and j.mode == spec.mode
                            and j.scale_min == spec.scale_min and j.scale_max == spec.scale_max)
                    if not same:
                        raise InputError(
                            f"judge {spec.name!r} already exists (id {j.id}, {j.endpoint}, prompt {j.prompt_name}, "
                            f"scale {j.scale_min:g}-{j.scale_max:g}): importing this reward model would make a second "
                            f"judge of that name; give it a distinct judge_model in the file (e.g. "
                            f"'{spec.name} (reward model)')")
    finally:
        engine.dispose()
