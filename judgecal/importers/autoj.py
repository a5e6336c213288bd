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

from judgecal.importers.records import Fields, ImportBatch, RespRef, read_jsonl

LABELS = {"0": "a", "1": "b", "2": "tie"}


def parse(path: Path, family: str | None = None) -> ImportBatch:
    """Parse the Auto-J pairwise file. ``family`` None: ``autoj/<scenario>`` per record.
    Raises InputError naming FILE:LINE and the field for a bad record."""
    path = Path(path)
    batch = ImportBatch(source=f"autoj/{path.name}")
    n = 0
    for line, obj in read_jsonl(path):
        f = Fields(obj, str(path), line)
        fam = family or f"autoj/{f.text('scenario', allow_empty=False).strip()}"  # --task-family: scenario unused
        prompt = f.text("prompt")
        a = batch.add_response(RespRef(fam, prompt, "autoj/response_1", f.text("response 1")))
        b = batch.add_response(RespRef(fam, prompt, "autoj/response_2", f.text("response 2")))
        if a == b:
            batch.skip("the two responses are identical (no preference to learn from)", f"{path}:{line}")
            continue
        batch.pair_labels.append((a, b, f.choice("label", LABELS), "autoj-human", batch.source))
        n += 1
    if n == 0:
        batch.warnings.append(f"{path}: no labelled pair imported")
    return batch
