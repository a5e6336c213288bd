"""Auto-J's pairwise test set (GAIR-NLP/auto-j ``data/test/testdata_pairwise.jsonl``).

One JSON object a line: ``prompt``, ``response 1``, ``response 2``, ``label`` (0 = the first
response is preferred, 1 = the second, 2 = tie; an integer or its string) and ``scenario`` (one
of Auto-J's 58 scenarios). Each record becomes an item under task family ``autoj/<scenario>``
(or the one family given), two responses (producing models ``autoj/response_1`` and
``autoj/response_2``: the file does not name the generators) and one pairwise expert label
(annotator ``autoj-human``); with a family given, ``scenario`` is not needed. The file holds
no judge scores: rate the responses with ``judgecal rate`` (or import ratings) before fitting. Source of the label coding: Auto-J's
README and ``codes/leaderboard/pairwise_eval.py`` (an exchanged prediction maps 0 <-> 1, 2 stays).
"""

from __future__ import annotations

from pathlib import Path

from judgecal.importers.records import NAME_MAX, Fields, ImportBatch, RespRef, Seen, check_family, read_jsonl, trim_name

LABELS = {"0": "a", "1": "b", "2": "tie"}
_SWAP = {"a": "b", "b": "a", "tie": "tie"}  # the label of the same pair given with its responses swapped


def parse(path: Path, family: str | None = None) -> ImportBatch:
    """Parse the Auto-J pairwise file. ``family`` None: ``autoj/<scenario>`` per record.
    Raises InputError naming FILE:LINE and the field for a bad record."""
    check_family(family)
    path = Path(path)
    batch = ImportBatch(source=f"autoj/{path.name}", files=[str(path)], origin=str(path))
    at = batch.at.setdefault("pair_labels", [])
    n = 0
    seen = Seen()
    trimmed: list[int] = []
    for line, obj in read_jsonl(path):
        f = Fields(obj, str(path), line)
        scenario = None if family else f.text("scenario", allow_empty=False)  # --task-family: scenario unused
        if scenario is not None and scenario != trim_name(scenario):
            trimmed.append(line)  # said in a warning: the family is the scenario without its spaces
        if scenario is not None and not trim_name(scenario):
            raise f.fail(f"field 'scenario' is {scenario!r}: nothing visible to name the family autoj/<scenario> by")
        fam = family or f"autoj/{trim_name(scenario)}"
        if len(fam) > NAME_MAX:
            raise f.fail(f"task family {fam[:40]!r}... is {len(fam)} characters, over the {NAME_MAX} a name may have")
        prompt = f.text("prompt")
        r1, r2 = f.text("response 1"), f.text("response 2")
        label = f.choice("label", LABELS)
        if r1 == r2:
            batch.skip("the two responses are identical (no preference to learn from)", f"{path}:{line}")
            continue
        if not seen.check_pair(f, "label", r1, r2, (fam, prompt), label, "label", swap=_SWAP.get):
            batch.skip("the same labelled pair repeated in the file (first kept)", f"{path}:{line}")
            continue
        a = batch.add_response(RespRef(fam, prompt, "autoj/response_1", r1))
        b = batch.add_response(RespRef(fam, prompt, "autoj/response_2", r2))
        batch.pair_labels.append((a, b, label, "autoj-human", batch.source))
        at.append(line)
        n += 1
    if trimmed:
        shown = ", ".join(str(x) for x in trimmed[:10]) + (", ..." if len(trimmed) > 10 else "")
        batch.warnings.append(f"{path}: {len(trimmed)} record(s) give a scenario with white space or invisible "
                              f"characters around it; the task family autoj/<scenario> leaves them out (lines {shown})")
    if n == 0:
        batch.warnings.append(f"{path}: no labelled pair imported")
    return batch
