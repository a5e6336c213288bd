"""AlpacaEval files (tatsu-lab/alpaca_eval): model outputs and pairwise judge annotations.

- ``results/<model>/model_outputs.json``: a JSON array of ``{dataset, instruction, output,
  generator}``; one file is one producing model (``generator``; mixed generators in one file
  are accepted and kept apart).
- ``results/<model>/<annotator>/annotations.json``: a JSON array of the annotator's pairwise
  verdicts, ``{instruction, output_1, generator_1, output_2, generator_2, annotator,
  preference, raw_completion, time_per_example, ...}``; ``output_1`` is the baseline's answer,
  ``output_2`` the model's, ``preference`` a float in [1, 2] (a number or a numeric string;
  2 = output_2 wins, 1.5 = tie; 0 is AlpacaEval's older encoding of a tie and is read as 1.5).
  Each verdict is stored as a ``pairwise_judgment`` with response_a = the model's answer,
  response_b = the baseline's, ``baseline_side`` 'b', ``preference`` = p - 1 (the probability
  that the model's answer is preferred), position 'na' (AlpacaEval's annotator randomises the
  order shown and does not record it). A null or empty preference is stored as an
  ``unparsed`` verdict and counted as skipped; a preference outside [1, 2] is a FILE:LINE error.
- A folder: every ``*/model_outputs.json`` and ``*/*/annotations.json`` below it (an AlpacaEval
  ``results/`` folder or one model's folder).

Items are matched by instruction text across files. ``pairs`` lists (concise file, verbose
file): for every instruction present in both, a verbosity pair (concise response, verbose
response) is recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

from judgecal.errors import InputError
from judgecal.importers.records import (
    JUDGE_NAME_MAX,
    NAME_MAX,
    SOURCE_MAX,
    Fields,
    ImportBatch,
    JudgeSpec,
    RespRef,
    Seen,
    check_family,
    read_json_array,
)

ANNOTATION_KEYS = ("output_1", "output_2", "generator_1", "generator_2")


def expand(paths: list[Path]) -> list[Path]:
    """Files to read: each file as given; a folder becomes its ``*/model_outputs.json``,
    ``model_outputs.json``, ``*/annotations.json`` and ``*/*/annotations.json`` (sorted).
    Raises InputError for a missing path or a folder without AlpacaEval files."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(
                set(p.glob("model_outputs.json")) | set(p.glob("*/model_outputs.json"))
                | set(p.glob("*/annotations.json")) | set(p.glob("*/*/annotations.json"))
            )
            if not found:
                raise InputError("no model_outputs.json or */annotations.json below this folder", source=str(p))
            out.extend(found)
        elif not p.exists():
            raise InputError("no such file", source=str(p))
        else:
            out.append(p)
    return list(dict.fromkeys(out))


def _model_of_results_folder(path: Path) -> str | None:
    """``<model>`` of ``.../<model>/<annotator>/annotations.json`` (None for another layout)."""
    if path.name == "annotations.json" and len(path.parts) >= 3:
        return path.parent.parent.name
    return None


def parse(paths: list[Path], family: str, pairs: list[tuple[Path, Path]] = ()) -> ImportBatch:
    """Parse AlpacaEval output and annotation files (and the files named in ``pairs``).

    Returns an ImportBatch (responses, verbosity pairs, pairwise verdicts; skipped records
    counted with reason and FILE:LINE). Raises InputError naming FILE:LINE for a bad record."""
    check_family(family)
    batch = ImportBatch(source="alpaca_eval")
    files = expand(list(paths)) + [Path(p) for pair in pairs for p in pair]
    files = list(dict.fromkeys(files))
    by_file: dict[Path, dict[str, RespRef]] = {}
    for path in files:
        records = read_json_array(path)
        if not records:
            batch.warnings.append(f"{path}: an empty JSON array: nothing to import from this file")
            continue
        first = records[0][1]
        if isinstance(first, dict) and any(k in first for k in ANNOTATION_KEYS + ("preference",)):
            if path.name == "model_outputs.json":
                batch.warnings.append(f"{path}:{records[0][0]}: this model_outputs.json holds annotation records "
                                      "(output_1/output_2/preference): read as pairwise verdicts")
            _annotations(batch, path, records, family)
            continue
        seen: dict[str, RespRef] = {}
        for line, obj in records:
            f = Fields(obj, str(path), line)
            if f.has("output_1") or f.has("output_2"):
                raise f.fail("an annotation record in a model-outputs file (the first record has no "
                             "output_1/output_2/generator_1/generator_2)")
            instruction = f.text("instruction", allow_empty=False)
            ref = batch.add_response(RespRef(family, instruction, f.name("generator"), f.text("output")))
            if instruction in seen:
                raise f.fail("instruction appears twice in this file (one output per instruction expected)")
            seen[instruction] = ref
        by_file[path] = seen
    for concise, verbose in pairs:
        if Path(concise) not in by_file or Path(verbose) not in by_file:
            raise InputError("--pair takes two model_outputs.json files, not annotations", source=str(concise))
        c, v = by_file[Path(concise)], by_file[Path(verbose)]
        common = [k for k in c if k in v]
        if not common:
            raise InputError(f"no instruction in common with {verbose}: cannot form verbosity pairs", source=str(concise))
        batch.verbosity_pairs.extend((c[k], v[k]) for k in common)
    return batch


def _preference(f: Fields) -> float | None:
    """AlpacaEval preference in [1, 2] (None when null/empty); 0 (older tie encoding) -> 1.5."""
    value = f.obj.get("preference")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    p = f.number("preference")
    if p == 0:
        return 1.5
    if not 1.0 <= p <= 2.0:
        raise f.fail(f"field 'preference' must be in [1, 2] (2 = output_2 preferred), got {p:g}")
    return p


def _raw_output(obj: dict) -> str | None:
    rc = obj.get("raw_completion")
    if isinstance(rc, dict):
        text = rc.get("text")
        if text is None and isinstance(rc.get("message"), dict):
            text = rc["message"].get("content")
        return text if isinstance(text, str) else None
    return rc if isinstance(rc, str) else None


def _annotations(batch: ImportBatch, path: Path, records: list, family: str) -> None:
    folder_model = _model_of_results_folder(path)
    named = [o.get("annotator") for _, o in records if isinstance(o, dict) and isinstance(o.get("annotator"), str) and o.get("annotator")]
    default_annotator = named[0] if named else (path.parent.name if folder_model else "alpaca_eval")
    unnamed: list[int] = []
    seen = Seen()
    renamed: dict[str, list[int]] = {}
    judges: dict[str, JudgeSpec] = {}
    for line, obj in records:
        f = Fields(obj, str(path), line)
        instruction = f.text("instruction", allow_empty=False)
        base = f.name("generator_1")
        model = f.name("generator_2")
        if folder_model and model != folder_model and model != base:
            if len(folder_model) > NAME_MAX:
                raise f.fail(f"the results folder's name {folder_model[:40]!r}... (the model's name) is "
                             f"{len(folder_model)} characters long; at most {NAME_MAX} are stored")
            renamed.setdefault(model, []).append(line)
            model = folder_model
        annotator = f.text("annotator", required=False, max_len=JUDGE_NAME_MAX)
        if not annotator:
            unnamed.append(line)
            annotator = default_annotator
        pref = _preference(f)
        if not seen.check(f, (annotator, model, instruction), pref, "verdict", same="annotator, model and instruction"):
            batch.skip("the same verdict appears twice in the file (first kept)", f"{path}:{line}")
            continue
        b = batch.add_response(RespRef(family, instruction, base, f.text("output_1")))
        a = batch.add_response(RespRef(family, instruction, model, f.text("output_2")))
        if model == base:
            # the baseline against itself: AlpacaEval's 50% by construction, no verdict to store
            batch.skip("the baseline compared with itself (win rate 50% by construction)", f"{path}:{line}")
            continue
        judge = judges.get(annotator)
        if judge is None:
            judge = judges[annotator] = JudgeSpec(name=annotator, model=annotator, endpoint="import:alpaca_eval",
                                                  prompt_name=annotator, scale_min=1.0, scale_max=2.0, mode="pairwise")
        latency = f.number("time_per_example", required=False)
        if latency is not None and latency < 0:
            raise f.fail(f"field 'time_per_example' must be >= 0 seconds, got {latency:g}")
        row = {"judge": judge, "a": a, "b": b, "position": "na", "sample_index": 0, "baseline_side": "b",
               "source": str(path)[:SOURCE_MAX], "raw_output": _raw_output(obj), "latency_s": latency}
        if pref is None:
            row.update(status="unparsed", verdict=None, preference=None, error="null preference in the annotations file")
            batch.skip("null preference (stored as an unparsed verdict, left out of win rates)", f"{path}:{line}")
        else:
            soft = pref - 1.0
            row.update(status="ok", preference=soft, error=None,
                       verdict="a" if soft > 0.5 else "b" if soft < 0.5 else "tie")
        batch.verdicts.append(row)
    if unnamed:
        batch.warnings.append(f"{path}:{unnamed[0]}: {len(unnamed)} records without an annotator: filed under "
                              f"{default_annotator!r} (the file's {'first named annotator' if named else 'folder name'})")
    for name, lines in renamed.items():
        batch.warnings.append(
            f"{path}:{lines[0]}: generator_2 {name!r} differs from the results folder's model {folder_model!r} "
            f"in {len(lines)} records: stored as {folder_model!r} (the name AlpacaEval's leaderboard uses)")
