"""PandaLM test set (WeOpenML/PandaLM ``data/testset-v1.json``).

A JSON array of ``{idx, motivation_app, cmp_key, instruction, input, response1, response2,
annotator1, annotator2, annotator3}``. The item prompt is the instruction, followed by a blank
line and the input, leaving out whichever is blank (one real record has the instruction " "). ``cmp_key`` ``"<model1>_<model2>"`` names the
producing models (split at the first ``_`` that leaves two non-empty names known from the
key; otherwise ``pandalm/response1``/``response2``). Each annotator becomes one pairwise
expert label (0 = tie, 1 = response1 better, 2 = response2 better).

Records whose response is not a string (the real file has six whose response is the JSON
value ``true``) are REJECTED one by one with a warning naming FILE:LINE and the reason; the rest
of the file is imported. Every other bad record aborts the whole import: among them a model
name (from ``cmp_key``), an ``idx`` or a ``--task-family`` over 200 characters (the database
column's size, refused on SQLite and PostgreSQL alike), and a record that repeats an earlier
one (same prompt, models and responses) with other annotations (FILE:LINE naming the earlier
line). A record that repeats an earlier one exactly is imported once, and one warning gives
the count and the lines.
"""

from __future__ import annotations

from pathlib import Path

from judgecal.importers.records import (NAME_MAX, Fields, ImportBatch, RespRef, Seen, UnreadFields, check_family,
                                       read_json_array)

ANNOTATION = {"0": "tie", "1": "a", "2": "b"}
#: The fields of a PandaLM test-set record (``motivation_app`` is not read).
FIELDS = frozenset({"idx", "motivation_app", "cmp_key", "instruction", "input", "response1", "response2",
                    "annotator1", "annotator2", "annotator3"})


def parse(path: Path, family: str) -> ImportBatch:
    """Parse the PandaLM JSON into an ImportBatch for ``family``. Raises InputError."""
    check_family(family)
    path = Path(path)
    batch = ImportBatch(source=f"pandalm/{path.name}", files=[str(path)], origin=str(path))
    at = batch.at.setdefault("pair_labels", [])
    seen = Seen()
    unread = UnreadFields(FIELDS)
    for line, obj in read_json_array(path):
        f = Fields(obj, str(path), line)
        unread.note(obj, line)
        bad = [k for k in ("response1", "response2") if k in obj and not isinstance(obj[k], str)]
        if bad:
            batch.warnings.append(
                f"{path}:{line}: record skipped: field {bad[0]!r} is {type(obj[bad[0]]).__name__} "
                f"{obj[bad[0]]!r}, not a response text"
            )
            continue
        parts = [f.text("instruction"), f.text("input", required=False) or ""]
        prompt = "\n\n".join(p for p in parts if p.strip())
        if not prompt:
            raise f.fail("fields 'instruction' and 'input' are both empty")
        model_a, model_b = _models(f.text("cmp_key", required=False))
        too_long = [x for x in (model_a, model_b) if len(x) > NAME_MAX]
        if too_long:
            raise f.fail(f"field 'cmp_key' names a model of {len(too_long[0])} characters; at most {NAME_MAX} are stored")
        external_id = None if obj.get("idx") is None else str(obj.get("idx"))
        if external_id is not None and len(external_id) > NAME_MAX:
            raise f.fail(f"field 'idx' is {len(external_id)} characters long; at most {NAME_MAX} are stored")
        a = RespRef(family, prompt, model_a, f.text("response1"))
        b = RespRef(family, prompt, model_b, f.text("response2"))
        labels = {k: f.choice(k, ANNOTATION) for k in ("annotator1", "annotator2", "annotator3")}
        if not seen.check(f, (a, b), labels, "record", same="instruction, input, models and responses"):
            continue
        batch.add_item(family, prompt, external_id=external_id)
        batch.add_response(a)
        batch.add_response(b)
        for k, pref in labels.items():
            batch.pair_labels.append((a, b, pref, f"pandalm-{k}", batch.source))
            at.append(line)
    seen.warn_repeats(batch, path)
    unread.warn(batch, path)
    return batch


def _models(cmp_key: str | None) -> tuple[str, str]:
    if cmp_key and "_" in cmp_key:
        left, right = cmp_key.split("_", 1)
        if left.strip() and right.strip() and left != right:  # a blank name is no name
            return left, right
    return "pandalm/response1", "pandalm/response2"
