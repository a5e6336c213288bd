"""LLMBar folders (princeton-nlp/LLMBar): ``dataset.json`` plus ``ratings_<JUDGE>.json``.

``dataset.json`` is a JSON array of ``{input, output_1, output_2, label}``; ``label`` is 1 or 2
(an integer or a string: both occur) naming the better output. Each becomes an item, two
responses (producing model ``llmbar/output_1`` and ``llmbar/output_2``: LLMBar does not name
the generators) and one pairwise expert label (annotator ``llmbar-gold``).

``ratings_<JUDGE>.json`` holds the same records plus ``results``: a list, or a Python-literal
string of a list (both occur), whose first element has ``score_1`` and ``score_2`` as
``[score_string, finish_reason]``. They become imported ratings by judge ``<JUDGE>`` with the
LLMBar "Rating" protocol on a 0-10 scale (the data README says 0-9, but real files contain the
score 10 twice, so the declared scale is 0-10 and no real score is dropped). An empty score
string is stored as an ``unparsed`` rating with its raw value, never as a low score. A ratings
record whose input/outputs differ from ``dataset.json`` at the same position is an error.
"""

from __future__ import annotations

import ast
from pathlib import Path

from judgecal.errors import InputError
from judgecal.importers.records import Fields, ImportBatch, JudgeSpec, RespRef, read_json_array

LABELS = {"1": "a", "2": "b"}
SCALE = (0.0, 10.0)


def parse(folder: Path, family: str) -> ImportBatch:
    """Parse an LLMBar folder into an ImportBatch for ``family``. Raises InputError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder (expected an LLMBar folder with dataset.json)", source=str(folder))
    dataset = folder / "dataset.json"
    batch = ImportBatch(source=f"llmbar/{folder.name}")
    pairs: list[tuple[RespRef, RespRef, dict]] = []
    for line, obj in read_json_array(dataset):
        f = Fields(obj, str(dataset), line)
        prompt = f.text("input")
        a = batch.add_response(RespRef(family, prompt, "llmbar/output_1", f.text("output_1")))
        b = batch.add_response(RespRef(family, prompt, "llmbar/output_2", f.text("output_2")))
        pref = f.choice("label", LABELS)
        batch.pair_labels.append((a, b, pref, "llmbar-gold", batch.source))
        pairs.append((a, b, obj))
    for path in sorted(folder.glob("ratings_*.json")):
        judge_name = path.stem[len("ratings_"):]
        judge = JudgeSpec(
            name=judge_name,
            model=judge_name,
            endpoint="import:llmbar",
            prompt_name="llmbar/Rating",
            scale_min=SCALE[0],
            scale_max=SCALE[1],
        )
        records = read_json_array(path)
        if len(records) != len(pairs):
            raise InputError(
                f"has {len(records)} records but dataset.json has {len(pairs)} (they must match one to one)",
                source=str(path),
                line=records[-1][0] if records else 1,
            )
        for (line, obj), (a, b, _) in zip(records, pairs):
            f = Fields(obj, str(path), line)
            if f.text("input") != a.prompt or f.text("output_1") != a.text or f.text("output_2") != b.text:
                raise f.fail("record does not match dataset.json at the same position")
            result = _first_result(f)
            for ref, key in ((a, "score_1"), (b, "score_2")):
                batch.ratings.append(_rating(f, judge, ref, result.get(key), key))
    return batch


def _first_result(f: Fields) -> dict:
    results = f.obj.get("results")
    if isinstance(results, str):
        try:
            results = ast.literal_eval(results)
        except (ValueError, SyntaxError):
            raise f.fail("field 'results' is a string that is not a Python literal") from None
    if not isinstance(results, list) or not results or not isinstance(results[0], dict):
        raise f.fail("field 'results' must be a non-empty list of objects")
    return results[0]


def _rating(f: Fields, judge: JudgeSpec, ref: RespRef, value, key: str) -> dict:
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    raw = "" if value is None else str(value)
    row = {"judge": judge, "response": ref, "sample_index": 0, "raw_output": raw}
    try:
        score = float(raw)
    except ValueError:
        return dict(row, status="unparsed", score=None, error=f"{key} is {raw!r} in the source file")
    if not judge.scale_min <= score <= judge.scale_max:
        raise f.fail(f"{key} {score:g} is outside the declared scale {judge.scale_min:g}-{judge.scale_max:g}")
    return dict(row, status="ok", score=score, error=None)
