"""LLMBar folders (princeton-nlp/LLMBar): ``dataset.json`` plus ``ratings_<JUDGE>.json``, or the
repository's own layout.

Two layouts are read:

* the shared-data layout: ``<set>/dataset.json`` and ``<set>/ratings_<JUDGE>.json``;
* the LLMBar repository's layout: ``Dataset/LLMBar/<set>/dataset.json`` with
  ``evaluators/<JUDGE>/<PROTOCOL>/result.json`` and ``statistics.json``, for every set
  (``Natural``, ``Adversarial/Neighbor``, ``Adversarial/GPTInst``, ``Adversarial/GPTOut``,
  ``Adversarial/Manual``). :func:`parse_any` takes a set folder, ``Dataset/LLMBar``, or the
  repository root. Families: ``llmbar/Natural``, ``llmbar/Adversarial_<set>``. Only the
  pointwise rating protocols (``Rating``, ``Rating_*``) hold per-output scores: ``Rating`` is
  imported as judge ``<JUDGE>``, ``Rating_<variant>`` as ``<JUDGE>/Rating_<variant>``; the
  other protocols (Vanilla, CoT, Swap, Metrics, Reference ...) hold only a winner per pair and
  are counted as skipped, never silently dropped. When ``statistics.json`` is present its
  ``correct_average`` (LLMBar's accuracy: the mean over both presentation orders, i.e. a tie
  counts 1/2; the repository stores it as a percentage string such as ``"92.0%"``, and a plain
  number <= 1 is read as a share) is compared with the agreement of the imported scores; a
  difference, or a value that is not a finite accuracy (NaN, Infinity, text), is a warning.

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
from judgecal.importers.records import Fields, ImportBatch, JudgeSpec, RespRef, read_json_array, check_family

LABELS = {"1": "a", "2": "b"}
SCALE = (0.0, 10.0)


def set_folders(root: Path) -> list[tuple[Path, str]]:
    """(set folder, default family) of every LLMBar set under ``root``: a set folder itself, the
    repository's ``Dataset/LLMBar`` folder, or the repository root. Empty when none is found."""
    root = Path(root)
    if (root / "dataset.json").is_file():
        parent = root.resolve().parent.name
        name = f"Adversarial_{root.resolve().name}" if parent == "Adversarial" else root.resolve().name
        return [(root, f"llmbar/{name}")]
    base = root / "Dataset" / "LLMBar" if (root / "Dataset" / "LLMBar").is_dir() else root
    out = []
    for d in sorted(base.iterdir()) if base.is_dir() else []:
        if (d / "dataset.json").is_file():
            out.append((d, f"llmbar/{d.name}"))
        elif d.is_dir() and d.name == "Adversarial":
            out += [(a, f"llmbar/Adversarial_{a.name}") for a in sorted(d.iterdir()) if (a / "dataset.json").is_file()]
    return out


def parse_any(folder: Path, family: str | None = None) -> ImportBatch:
    """Every LLMBar set found under ``folder`` (see :func:`set_folders`) in one batch. A given
    ``family`` files a single set under that name (refused for several sets). Raises InputError."""
    check_family(family)
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder (expected an LLMBar set folder, Dataset/LLMBar or the repository root)",
                         source=str(folder))
    sets = set_folders(folder)
    if not sets:
        raise InputError("no LLMBar set found (no dataset.json here, nor under Dataset/LLMBar/<set>/)", source=str(folder))
    if family and len(sets) > 1:
        raise InputError(f"--task-family names one family but {len(sets)} LLMBar sets were found", source=str(folder))
    batch = ImportBatch(source=f"llmbar/{folder.resolve().name}")
    for path, fam in sets:
        parse(path, family or fam, batch=batch)
    return batch


def parse(folder: Path, family: str, batch: ImportBatch | None = None) -> ImportBatch:
    """Parse one LLMBar set folder (either layout) into an ImportBatch for ``family`` (added to
    ``batch`` when given). Raises InputError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder (expected an LLMBar folder with dataset.json)", source=str(folder))
    dataset = folder / "dataset.json"
    batch = batch or ImportBatch(source=f"llmbar/{folder.name}")
    pairs: list[tuple[RespRef, RespRef, dict]] = []
    for line, obj in read_json_array(dataset):
        f = Fields(obj, str(dataset), line)
        prompt = f.text("input")
        a = batch.add_response(RespRef(family, prompt, "llmbar/output_1", f.text("output_1")))
        b = batch.add_response(RespRef(family, prompt, "llmbar/output_2", f.text("output_2")))
        pref = f.choice("label", LABELS)
        batch.pair_labels.append((a, b, pref, "llmbar-gold", batch.source))
        pairs.append((a, b, obj))
    if not pairs:
        batch.warnings.append(f"{dataset}: no record (an empty array): nothing imported from this set")
    sources = [(path, path.stem[len("ratings_"):], "Rating", None) for path in sorted(folder.glob("ratings_*.json"))]
    ev_dir = folder / "evaluators"
    if ev_dir.is_dir():
        for jdir in sorted(p for p in ev_dir.iterdir() if p.is_dir()):
            for pdir in sorted(p for p in jdir.iterdir() if p.is_dir()):
                result = pdir / "result.json"
                if not result.is_file():
                    continue
                if pdir.name == "Rating" or pdir.name.startswith("Rating_"):
                    name = jdir.name if pdir.name == "Rating" else f"{jdir.name}/{pdir.name}"
                    sources.append((result, name, pdir.name, pdir / "statistics.json"))
                else:
                    batch.skip(f"LLMBar protocol {pdir.name}: a winner per pair, no per-output score "
                               f"(only the Rating protocols are imported)", str(result))
    for path, judge_name, protocol, stats in sources:
        judge = JudgeSpec(
            name=judge_name,
            model=judge_name.split("/")[0],
            endpoint="import:llmbar",
            prompt_name=f"llmbar/{protocol}",
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
        if stats is not None and stats.is_file():
            _check_statistics(batch, stats, judge, pairs)
    return batch


def correct_average_share(value) -> float:
    """LLMBar's ``correct_average`` as a share in [0, 1]. The repository stores a percentage
    string (``"92.0%"`` in ``Dataset/LLMBar/Natural/evaluators/GPT-4/Rating/statistics.json``);
    a number or numeric string without ``%`` is read as a share when <= 1, else as a percentage.
    Raises ValueError for NaN, infinities, booleans, text, or a value outside 0-100%."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    text = str(value).strip()
    percent = text.endswith("%")
    number = float(text.rstrip("%").strip()) if isinstance(value, str) else float(value)
    import math

    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    share = number / 100.0 if percent or number > 1 else number
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"{value!r} is not an accuracy between 0 and 100%")
    return share


def _check_statistics(batch: ImportBatch, stats: Path, judge: JudgeSpec, pairs) -> None:
    """Compare LLMBar's ``correct_average`` with the agreement of the imported scores (ties 1/2)."""
    import json

    from judgecal.importers.records import read_text

    try:
        data = json.loads(read_text(stats))
        theirs = correct_average_share(data["correct_average"])
    except (ValueError, KeyError, TypeError) as exc:
        why = f" ({exc})" if isinstance(exc, ValueError) else ""
        batch.warnings.append(f"{stats}: no readable correct_average{why}: LLMBar's own accuracy was not compared")
        return
    by_ref = {(r["response"], r["judge"]): r for r in batch.ratings if r["judge"] == judge}
    credit, unparsed = [], 0
    for a, b, obj in pairs:
        ra, rb = by_ref.get((a, judge)), by_ref.get((b, judge))
        if ra is None or rb is None or ra["status"] != "ok" or rb["status"] != "ok":
            unparsed += 1
            continue
        label = str(obj.get("label")).strip()
        better_a = ra["score"] > rb["score"]
        credit.append(0.5 if ra["score"] == rb["score"] else float(better_a == (label == "1")))
    if unparsed or not credit:
        return  # LLMBar scores unparsed outputs its own way: nothing exact to compare
    ours = sum(credit) / len(credit)
    if abs(ours - theirs) > 5e-4:
        batch.warnings.append(f"{stats}: LLMBar's correct_average is {theirs:.4f} but the imported scores give "
                              f"{ours:.4f} (ties 1/2) over {len(credit)} pairs: check the files belong together")


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
