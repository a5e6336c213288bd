"""LLMBar folders (princeton-nlp/LLMBar): ``dataset.json`` plus ``ratings_<JUDGE>.json``, or the
repository's own layout with every judge and protocol.

Two layouts are read:

* the shared-data layout: ``<set>/dataset.json`` and ``<set>/ratings_<JUDGE>.json``;
* the LLMBar repository's layout: ``Dataset/LLMBar/<set>/dataset.json`` with
  ``evaluators/<JUDGE>/<PROTOCOL>/result.json`` and ``statistics.json``, for every set
  (``Natural``, ``Adversarial/Neighbor``, ``Adversarial/GPTInst``, ``Adversarial/GPTOut``,
  ``Adversarial/Manual``). :func:`parse_any` takes a set folder, ``Dataset/LLMBar``, or the
  repository root. Families: ``llmbar/Natural``, ``llmbar/Adversarial_<set>``.

``dataset.json`` is a JSON array of ``{input, output_1, output_2, label}``; ``label`` is 1 or 2
(an integer or a string: both occur) naming the better output. Each becomes an item, two
responses (producing model ``llmbar/output_1`` and ``llmbar/output_2``: LLMBar does not name
the generators) and one pairwise expert label (annotator ``llmbar-gold``).

Every ``result.json`` holds the dataset's records, in the same order, plus ``results``: a list
(or, in the shared layout's ratings files, a Python-literal string of one), whose LAST element
is the protocol's final output (source: LLMBar ``LLMEvaluator/evaluate.py``, ``annotate``); the
elements before it are the judge's auxiliary outputs (``[text, finish_reason]``: the metrics
questions it wrote, its own reference answer) or, in the Swap protocols, the first stage when
the two orders disagreed (the final element is then the synthesis stage). Those earlier
elements are counted as not imported, by reason.

* **Rating protocols** (``Rating``, ``Rating_*``): the last element holds ``score_1`` and
  ``score_2`` as ``[score_string, finish_reason]``; each output's score becomes an imported
  rating by judge ``<JUDGE>`` (``Rating``; the same judge as the shared layout's
  ``ratings_<JUDGE>.json``) or ``<JUDGE>/Rating_<variant>``, prompt ``llmbar/<PROTOCOL>``, on a
  0-10 scale (the data README says 0-9, but real files contain the score 10 twice). An empty
  score string is an ``unparsed`` rating with its raw value, never a low score.
* **Pairwise protocols** (every other folder: Vanilla, Vanilla_NoRules, Vanilla_1shot/2shot,
  CoT, Swap, Swap_CoT, Metrics, Reference, Metrics_Reference ...): the last element is
  ``{"swap = False": {"completion": [text, finish_reason], "winner": "1"|"2"|null}, "swap =
  True": {...}}``: the pair judged with output_1 shown first and with output_2 shown first,
  the winner already numbered as in the dataset. Each order becomes a pairwise verdict of
  judge ``<JUDGE>/<PROTOCOL>`` (model ``<JUDGE>``, prompt ``llmbar/<PROTOCOL>``, mode
  pairwise): response a = output_1, b = output_2, position ``ab`` (swap = False) or ``ba``
  (swap = True), verdict ``a``/``b``, preference 1/0, the completion as raw output. A null
  winner (the output matched none of the protocol's verdict patterns) is an ``unparsed``
  verdict with its text kept.

A record that differs from ``dataset.json`` at the same position (input, outputs, label), a
result file with another number of records, and any other shape are FILE:LINE errors.

Nothing in the folder given is passed over: every file or folder not read is counted with its
path and reason (:attr:`ImportBatch.not_read`; the import summary's ``not read: PATH
(reason)``): at the repository root everything but ``Dataset/`` (``LLMEvaluator/`` is code), in
``Dataset/`` the ``CaseStudy/`` and ``Processed/`` folders (the paper's case-study sets and other
benchmarks as LLMBar processed them: not LLMBar's evaluation sets; give their folder to import
them) and anything else besides ``LLMBar/``, entries of the folder of sets that are not sets,
entries of a set folder that are not its files, a protocol folder without ``result.json`` and
anything else in ``evaluators/`` that is not a judge/protocol folder or their two files.

``statistics.json`` (the repository's own figures: correct per order, average, both,
"equal", Cohen's kappas; :mod:`judgecal.calibrate.llmbar_stats`) is read and compared with
the same figures recomputed from the imported verdicts or scores: every comparison is returned
(``parity``), and a difference is a warning. A ``correct_average`` that is not a finite
accuracy is a warning too (it is printed as ``"92.0%"``; a plain number <= 1 is read as a share).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from judgecal.calibrate import llmbar_stats
from judgecal.errors import InputError
from judgecal.importers.records import (
    DuplicateKey,
    Fields,
    ImportBatch,
    JudgeSpec,
    RespRef,
    UnreadFields,
    Verdict,
    unstorable,
    check_family,
    merge,
    read_json_array,
    read_text,
    repeat_message,
    trim_name,
)

LABELS = {"1": "a", "2": "b"}
#: a score as LLMBar's judges write it: ASCII digits, with a decimal part at most
_SCORE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
#: The fields of a dataset.json record, and of a ratings/result file's record (plus ``results``).
DATASET_FIELDS = frozenset({"input", "output_1", "output_2", "label"})
RESULT_FIELDS = DATASET_FIELDS | {"results"}
#: the keys of a result's last element: a rating protocol's, a pairwise protocol's, and one order's in it
ORDER_KEYS = frozenset({"swap = False", "swap = True"})
RATING_KEYS = frozenset({"score_1", "score_2"}) | ORDER_KEYS  # (the repository adds the winners the scores give)
VERDICT_KEYS = frozenset({"winner", "completion", "prompt"})
SCALE = (0.0, 10.0)
#: The scale of a pairwise protocol's judge: P(output_1 preferred) in [0, 1].
VERDICT_SCALE = (0.0, 1.0)
ORDERS = (("swap = False", "ab"), ("swap = True", "ba"))
WINNERS = {"1": ("a", 1.0), "2": ("b", 0.0)}


def is_rating_protocol(protocol: str) -> bool:
    """Whether an LLMBar protocol folder holds per-output scores (``Rating``, ``Rating_*``)."""
    return protocol == "Rating" or protocol.startswith("Rating_")


def judge_name(judge: str, protocol: str) -> str:
    """The judgecal judge name of an LLMBar judge x protocol: ``<JUDGE>`` for ``Rating`` (as
    the shared layout's ``ratings_<JUDGE>.json``), ``<JUDGE>/<PROTOCOL>`` otherwise."""
    return judge if protocol == "Rating" else f"{judge}/{protocol}"


def judge_spec(judge: str, protocol: str) -> JudgeSpec:
    """The imported judge of an LLMBar judge x protocol (module doc)."""
    if is_rating_protocol(protocol):
        return JudgeSpec(name=judge_name(judge, protocol), model=judge, endpoint="import:llmbar",
                         prompt_name=f"llmbar/{protocol}", scale_min=SCALE[0], scale_max=SCALE[1])
    return JudgeSpec(name=judge_name(judge, protocol), model=judge, endpoint="import:llmbar",
                     prompt_name=f"llmbar/{protocol}", scale_min=VERDICT_SCALE[0], scale_max=VERDICT_SCALE[1],
                     mode="pairwise")


def set_name(folder: Path) -> str:
    """The default family (and label source) of a set folder: ``llmbar/<set>``, or
    ``llmbar/Adversarial_<set>`` for a folder under ``Adversarial/`` (so the repository's
    ``Adversarial/Neighbor`` and the shared layout's ``Adversarial_Neighbor`` are one set)."""
    folder = Path(folder).resolve()
    return f"llmbar/Adversarial_{folder.name}" if folder.parent.name == "Adversarial" else f"llmbar/{folder.name}"


#: Why a folder of the LLMBar repository that is not one of LLMBar's evaluation sets is not read
#: (the repository's README, "Data"): it is counted and named in the import summary, never passed over.
CASE_STUDY = ("not an LLMBar evaluation set: the paper's case-study sets (section 4.6: Constraint, Negation, Normal, "
              "Base-9, Base-10), built to probe evaluators beyond LLMBar's Natural and Adversarial sets; to import "
              "them, give this folder or one of its sets (families llmbar/<set>)")
PROCESSED = ("not an LLMBar evaluation set: other meta-evaluation benchmarks as LLMBar's authors processed them "
             "(FairEval, LLMEval^2, MT-Bench); to import them, give this folder or one of its sets (families "
             "llmbar/<set>)")
CODE = "LLMBar's evaluation code (evaluate.py, prompts, configs), not data"
NOT_DATA = "not LLMBar data: the repository's evaluation sets are under Dataset/LLMBar/"
OTHER_DATASET = "not an LLMBar evaluation set: LLMBar's sets are under Dataset/LLMBar/"
NO_SET = "not an LLMBar set: no dataset.json in it"
NO_SET_FILE = "not an LLMBar set: a file, where a set is a folder holding dataset.json"


def set_folders(root: Path) -> list[tuple[Path, str]]:
    """(set folder, default family) of every LLMBar set under ``root``: a set folder itself, the
    repository's ``Dataset/LLMBar/Adversarial``, ``Dataset/LLMBar`` or ``Dataset`` folder, or the
    repository root (the adversarial sets are ``llmbar/Adversarial_<set>`` from every level).
    Empty when none is found. :func:`find_sets` also names what is not read."""
    return find_sets(root)[0]


def find_sets(root: Path) -> tuple[list[tuple[Path, str]], list[tuple[str, str]]]:
    """(:func:`set_folders`, not read): the sets under ``root`` and every file or folder on the
    way to them that is not read, as (path, reason): at the repository root everything but
    ``Dataset/`` (``LLMEvaluator/``: the code; README, LICENSE...), in ``Dataset/`` everything but
    ``LLMBar/`` (``CaseStudy/`` and ``Processed/``: :data:`CASE_STUDY`, :data:`PROCESSED`), and
    in the folder of sets (and ``Adversarial/``) every entry that is not a set. A set folder's
    own entries are counted by :func:`set_batches`."""
    root = Path(root)
    if (root / "dataset.json").is_file():
        return [(root, set_name(root))], []
    not_read: list[tuple[str, str]] = []
    dataset = (root / "Dataset" if (root / "Dataset" / "LLMBar").is_dir()
               else root if (root / "LLMBar").is_dir() and root.name == "Dataset" else None)
    if dataset is not None and dataset != root:  # the repository root
        not_read += [(str(e), CODE if e.name == "LLMEvaluator" else NOT_DATA)
                     for e in sorted(root.iterdir()) if e.name != "Dataset"]
    if dataset is not None:
        why = {"CaseStudy": CASE_STUDY, "Processed": PROCESSED}
        not_read += [(str(e), why.get(e.name, OTHER_DATASET)) for e in sorted(dataset.iterdir()) if e.name != "LLMBar"]
    base = root if dataset is None else dataset / "LLMBar"
    # the repository's Adversarial folder itself: its sets are Adversarial_<set>, as from the root
    prefix = "Adversarial_" if base.name == "Adversarial" else ""
    out = []
    for d in sorted(base.iterdir()) if base.is_dir() else []:
        if (d / "dataset.json").is_file():
            out.append((d, f"llmbar/{prefix}{d.name}"))
        elif d.is_dir() and d.name == "Adversarial":
            for a in sorted(d.iterdir()):
                if (a / "dataset.json").is_file():
                    out.append((a, f"llmbar/Adversarial_{a.name}"))
                else:
                    not_read.append((str(a), NO_SET if a.is_dir() else NO_SET_FILE))
        else:
            not_read.append((str(d), NO_SET if d.is_dir() else NO_SET_FILE))
    return out, not_read


def parse_any(folder: Path, family: str | None = None, parity: list | None = None) -> ImportBatch:
    """Every LLMBar set found under ``folder`` (see :func:`set_folders`) in one batch. A given
    ``family`` files a single set under that name (refused for several sets). ``parity``: a
    list that receives one dict per statistics.json compared (:func:`batches`). Raises InputError."""
    return merge(f"llmbar/{Path(folder).resolve().name}", batches(folder, family, parity))


def batches(folder: Path, family: str | None = None, parity: list | None = None,
            stored: StoredPairs | None = None) -> Iterator[ImportBatch]:
    """The batches of an LLMBar import, one per file (``dataset.json``, each ratings or result
    file), each with its origin and lines for FILE:LINE messages; :func:`parse_any` merges them.
    Checks the folder before the first batch. ``parity`` receives one dict per statistics.json
    compared: {"file", "task_family", "judge", "protocol", "n_pairs", "figures" (judgecal's
    reproduction, statistics.json's keys), "file_figures", "differences" (lines; empty =
    parity)}. Raises InputError."""
    check_family(family)
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder (expected an LLMBar set folder, Dataset/LLMBar or the repository root)",
                         source=str(folder))
    sets, not_read = find_sets(folder)
    if not sets:
        raise InputError("no LLMBar set found (no dataset.json here, nor under Dataset/LLMBar/<set>/)", source=str(folder))
    if family and len(sets) > 1:
        raise InputError(f"--task-family names one family but {len(sets)} LLMBar sets were found", source=str(folder))
    for path, fam in sets if not family else ():  # a family named by a folder: visible, as --task-family must be
        if Path(path).name != trim_name(Path(path).name):
            raise InputError(f"the folder's name gives the family {fam!r}, which begins or ends with white space or an "
                             "invisible character (a family apart from the one you see): rename the folder or give "
                             "--task-family", source=str(path))
    return _batches(sets, family, parity, stored, not_read)


def _batches(sets, family, parity, stored, not_read=()) -> Iterator[ImportBatch]:
    if not_read:  # what the folder given holds besides the sets: counted and named, never passed over
        passed = ImportBatch(source=f"llmbar/{sets[0][0].name}")
        for path, reason in not_read:
            passed.pass_over(reason, path)
        yield passed
    for path, fam in sets:
        yield from set_batches(path, family or fam, parity, stored(family or fam) if stored else ())


def parse(folder: Path, family: str, batch: ImportBatch | None = None, parity: list | None = None) -> ImportBatch:
    """Parse one LLMBar set folder (either layout) into one ImportBatch for ``family`` (added to
    ``batch`` when given). Raises InputError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder (expected an LLMBar folder with dataset.json)", source=str(folder))
    merged = merge(f"llmbar/{folder.name}", set_batches(folder, family, parity))
    if batch is None:
        return merged
    return merge(batch.source, [batch, merged])


class _Pair:
    __slots__ = ("a", "b", "label", "line", "twin_of")

    def __init__(self, a: RespRef, b: RespRef, label, line: int, twin_of: str | None = None):
        self.a, self.b, self.label, self.line = a, b, label, line
        self.twin_of = twin_of  # where the pair this record repeats is ("line 3", or a stored label): not stored again


#: the gold pairs stored in a family: family -> [(input, output a, output b, preference 'a'|'b'|'tie')]
StoredPairs = Callable[[str], Iterable[tuple[str, str, str, str]]]


def set_batches(folder: Path, family: str, parity: list | None = None,
                stored: Iterable[tuple[str, str, str, str]] = ()) -> Iterator[ImportBatch]:
    """The batches of one set folder: ``dataset.json`` first, then every ratings and result file
    in name order (module doc). ``stored``: the gold pairs of ``family`` already in the database
    (prompt, output a, output b, preference): a record giving one of them with its outputs
    swapped is that pair (counted, not stored again; refused when it names the other output
    better). A record giving one in the same order is the same responses (nothing new either)."""
    folder = Path(folder)
    dataset = folder / "dataset.json"
    first = ImportBatch(source=set_name(folder))
    first.origin = str(dataset)
    first.files = [str(dataset)]
    pairs: list[_Pair] = []
    lines = first.at.setdefault("pair_labels", [])
    better: dict[tuple[str, str, str], tuple[int | str, str]] = {}  # (input, output, output) -> (line, the better one)
    swapped_stored: dict[tuple[str, str, str], str] = {}  # a stored pair, outputs swapped -> the better one
    same_stored: dict[tuple[str, str, str], str] = {}  # a stored pair in its order -> the better one
    for prompt, text_a, text_b, pref in stored:  # (the same order is the same rows: nothing new, not a twin)
        if pref in ("a", "b") and text_a != text_b:
            swapped_stored[(prompt, text_b, text_a)] = same_stored[(prompt, text_a, text_b)] = (
                text_a if pref == "a" else text_b)
    unread = UnreadFields(DATASET_FIELDS)
    for line, obj in read_json_array(dataset):
        f = Fields(obj, str(dataset), line)
        unread.note(obj, line)
        prompt, out1, out2 = f.text("input"), f.text("output_1"), f.text("output_2")
        pref = f.choice("label", LABELS)
        best = out1 if pref == "a" else out2
        # one fact, one row (issue 23): the same two outputs again, in either order, are one pair
        seen = better.get((prompt, out1, out2)) or better.get((prompt, out2, out1))
        if seen is None and (prompt, out1, out2) in swapped_stored:
            seen = ("an earlier import", swapped_stored[(prompt, out1, out2)])
        if seen is None and same_stored.get((prompt, out1, out2), best) != best:  # the same order, the other label
            raise f.fail(f"the same pair as an earlier import (the gold label stored in {family}, from another source) "
                         "with the other output labelled better: one pair, one label (remove one of them)")
        if seen is not None and out1 != out2:
            there = f"line {seen[0]}" if isinstance(seen[0], int) else f"{seen[0]} (the gold label stored in {family})"
            if seen[1] != best:
                raise f.fail(f"the same pair as {there} (same input and outputs"
                             f"{', swapped' if (prompt, out1, out2) not in better or isinstance(seen[0], str) else ''}"
                             ") with the other output labelled better: one pair, one label (remove one of them)")
            a = RespRef(family, prompt, "llmbar/output_1", out1)
            b = RespRef(family, prompt, "llmbar/output_2", out2)
            pairs.append(_Pair(a, b, obj.get("label"), line, twin_of=there))
            first.skip("LLMBar dataset.json: the same pair (input and both outputs, in either order) and label as an "
                       "earlier record: one pair, stored once (the result files' records at its position are not "
                       "imported either)", f"{dataset}:{line} ({there})")
            continue
        better[(prompt, out1, out2)] = (line, best)
        a = first.add_response(RespRef(family, prompt, "llmbar/output_1", out1))
        b = first.add_response(RespRef(family, prompt, "llmbar/output_2", out2))
        first.pair_labels.append((a, b, pref, "llmbar-gold", first.source))
        lines.append(line)
        pairs.append(_Pair(a, b, obj.get("label"), line))
    if not pairs:
        first.warnings.append(f"{dataset}: no record (an empty array): nothing imported from this set")
    unread.warn(first, dataset)
    yield first
    skipped = ImportBatch(source=first.source)
    for entry in sorted(folder.iterdir()):  # what the set folder holds that is not read: counted, never passed over
        if entry.name not in ("dataset.json", "evaluators") and not _is_ratings_file(entry):
            skipped.pass_over("not an LLMBar file: a set folder holds dataset.json, ratings_<JUDGE>.json and "
                              "evaluators/; names are case-sensitive", str(entry))
    for path in sorted(folder.glob("ratings_*.json")):
        if _is_ratings_file(path):
            yield _result_batch(path, path.stem[len("ratings_"):], "Rating", None, pairs, first.source, parity)
    ev_dir = folder / "evaluators"
    if not ev_dir.is_dir():
        if ev_dir.exists() or ev_dir.is_symlink():  # a file (or a dangling link) named evaluators
            skipped.pass_over("not an LLMBar file: evaluators must be a folder of <JUDGE>/<PROTOCOL>/ folders",
                              str(ev_dir))
        if skipped.not_read:
            yield skipped
        return
    for jdir in sorted(ev_dir.iterdir()):
        if not jdir.is_dir():
            skipped.pass_over("not a judge folder in evaluators/: not a folder", str(jdir))
            continue
        for pdir in sorted(jdir.iterdir()):
            if not pdir.is_dir():
                skipped.pass_over("not a protocol folder in evaluators/<judge>/: not a folder", str(pdir))
                continue
            result = pdir / "result.json"
            if not result.is_file():
                skipped.pass_over("protocol folder without result.json", str(pdir))
                continue
            for entry in sorted(pdir.iterdir()):  # what a protocol folder holds besides its two files: counted
                if entry.name not in ("result.json", "statistics.json"):
                    skipped.pass_over("not read in a protocol folder: it holds result.json and statistics.json; names "
                                      "are case-sensitive (a statistics file of another case is not compared)",
                                      str(entry))
            stats = pdir / "statistics.json"
            yield _result_batch(result, jdir.name, pdir.name, stats if stats.is_file() else None, pairs,
                                first.source, parity)
    if skipped.not_read:
        yield skipped


def _is_ratings_file(path: Path) -> bool:
    """Whether ``path`` is a shared-layout ratings file: ``ratings_<JUDGE>.json`` (exactly that
    case) that is not a folder."""
    return path.name.startswith("ratings_") and path.name.endswith(".json") and not path.is_dir()


def _literal(text: str):
    """``ast.literal_eval`` of ``text``, refusing a dict literal that gives one key twice
    (literal_eval keeps the last value silently): raises DuplicateKey, or literal_eval's errors."""
    tree = ast.parse(text.strip(), mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            seen = set()
            for k in node.keys:
                if isinstance(k, ast.Constant):
                    if k.value in seen:
                        raise DuplicateKey(repeat_message(str(k.value), "one dict of the literal"))
                    seen.add(k.value)
    return ast.literal_eval(tree)


def _results(f: Fields) -> list:
    results = f.obj.get("results")
    if isinstance(results, str):
        try:
            results = _literal(results)
        except DuplicateKey as exc:
            raise f.fail(f"field 'results' (a Python literal string): {exc}") from None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise f.fail("field 'results' is a string that is not a Python literal") from None
    if not isinstance(results, list) or not results:
        raise f.fail("field 'results' must be a non-empty list (its last element is the protocol's final output)")
    return results


def _completion(f: Fields, value, where: str) -> tuple[str, str]:
    if (not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], str)
            or not isinstance(value[1], str)):
        raise f.fail(f"{where}: expected [completion text, finish reason], got {json.dumps(value)[:60]}")
    problem = unstorable(value[0])
    if problem:  # the completion is stored as the verdict's raw output (the finish reason only as its repr)
        raise f.fail(f"{where}[0] (the completion text) {problem}")
    return value[0], value[1]


def _result_batch(path: Path, judge: str, protocol: str, stats: Path | None, pairs: list[_Pair], source: str,
                  parity: list | None) -> ImportBatch:
    """The ratings or verdicts of one result (or ratings) file, checked against the dataset."""
    if not judge.strip():  # ratings_.json: no judge name to file the ratings under (issue 23)
        raise InputError("the file name gives no judge name (ratings_<JUDGE>.json, or evaluators/<JUDGE>/): rename it",
                         source=str(path))
    spec = judge_spec(judge, protocol)
    rating = is_rating_protocol(protocol)
    batch = ImportBatch(source=source)
    batch.origin = str(path)
    batch.files = [str(path)]
    at = batch.at.setdefault("ratings" if rating else "verdicts", [])
    records = read_json_array(path)
    if len(records) != len(pairs):
        raise InputError(f"has {len(records)} records but dataset.json has {len(pairs)} (they must match one to one)",
                         source=str(path), line=records[-1][0] if records else 1)
    src = str(path)
    win_false: list[str | None] = []
    win_true: list[str | None] = []
    labels = []
    aux_where: list[str] = []
    unread = UnreadFields(RESULT_FIELDS)
    unread_last = UnreadFields(RATING_KEYS if rating else ORDER_KEYS)
    unread_order = UnreadFields(VERDICT_KEYS)
    for (line, obj), pair in zip(records, pairs):
        f = Fields(obj, src, line)
        unread.note(obj, line)
        a, b = pair.a, pair.b
        if f.text("input") != a.prompt or f.text("output_1") != a.text or f.text("output_2") != b.text:
            raise f.fail(f"record does not match dataset.json at the same position (line {pair.line} there)")
        if "label" in f.obj and str(f.obj.get("label")).strip() != str(pair.label).strip():
            raise f.fail(f"label {json.dumps(f.obj.get('label'))} differs from dataset.json's "
                         f"{json.dumps(pair.label)} at the same position (line {pair.line} there)")
        labels.append(f.obj.get("label", pair.label))
        results = _results(f)
        last = results[-1]
        unread_last.note(last, line)
        if not rating and isinstance(last, dict):
            for key, _ in ORDERS:
                unread_order.note(last.get(key), line)
        twin = pair.twin_of is not None  # read for statistics.json's figures (over every record), not stored
        if twin:
            batch.skip("LLMBar: the judge's output on a pair that dataset.json repeats (one pair, stored once)",
                       f"{src}:{line} (dataset.json line {pair.line} repeats {pair.twin_of})")
        elif len(results) > 1:
            aux_where.append(f"{src}:{line}")
        if not twin:
            batch.add_response(a)
            batch.add_response(b)
        if rating:
            if not isinstance(last, dict) or "score_1" not in last or "score_2" not in last:
                raise f.fail(f"the last element of 'results' must be an object with score_1 and score_2 "
                             f"(protocol {protocol}), got {json.dumps(last)[:60]}")
            for ref, key in ((a, "score_1"), (b, "score_2")):
                row = _rating(f, spec, ref, last.get(key), key)
                if not twin:
                    batch.ratings.append(row)
                    at.append(line)
            raw = [str(x[0]) if isinstance(x, (list, tuple)) and x else x for x in (last["score_1"], last["score_2"])]
            wf, wt = llmbar_stats.winners_from_scores(*raw)
        else:
            if not isinstance(last, dict) or any(k not in last for k, _ in ORDERS):
                raise f.fail(f"the last element of 'results' must be an object with 'swap = False' and 'swap = True' "
                             f"(protocol {protocol}), got {json.dumps(last)[:60]}")
            found = []
            for key, position in ORDERS:
                one = last[key]
                if not isinstance(one, dict) or "winner" not in one:
                    raise f.fail(f"results[-1][{key!r}] must be an object with 'winner'")
                winner = one["winner"]
                text, finish = _completion(f, one.get("completion", ["", ""]), f"results[-1][{key!r}]['completion']")
                if winner is not None and winner not in WINNERS:
                    raise f.fail(f"results[-1][{key!r}]['winner'] must be \"1\", \"2\" or null, got {json.dumps(winner)[:40]}")
                found.append(winner)
                if twin:
                    continue
                if winner is None:
                    batch.verdicts.append(Verdict(spec, a, b, 0, position, "unparsed", None, None, None, src, text,
                                                  f"LLMBar winner is null: the output matched none of the protocol's "
                                                  f"verdict patterns (finish reason {finish!r})"))
                else:
                    verdict, pref = WINNERS[winner]
                    batch.verdicts.append(Verdict(spec, a, b, 0, position, "ok", verdict, pref, None, src, text, None))
                at.append(line)
            wf, wt = found
        win_false.append(wf)
        win_true.append(wt)
    if aux_where:
        what = ("the first stage, whose two orders disagreed, re-judged by the synthesis stage (the last element, "
                "imported)" if protocol.startswith("Swap") else
                "auxiliary outputs (the judge's own metrics questions or reference answer written before its verdict)")
        for w in aux_where:
            batch.skip(f"LLMBar {protocol}: {what}", w)
    unread.warn(batch, path)
    unread_last.warn(batch, f"{path} (the last element of 'results')")
    unread_order.warn(batch, f"{path} (results[-1]['swap = False'/'swap = True'])")
    if stats is not None:
        _check_statistics(batch, stats, spec, judge, protocol, pairs, labels, win_false, win_true, parity)
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


def _check_statistics(batch: ImportBatch, stats: Path, spec: JudgeSpec, judge: str, protocol: str, pairs,
                      labels, win_false, win_true, parity: list | None) -> None:
    """Compare statistics.json with the figures recomputed from the file's winners (module doc)."""
    fam = pairs[0].a.family if pairs else None
    try:
        data = json.loads(read_text(stats))
    except (ValueError, RecursionError) as exc:
        batch.warnings.append(f"{stats}: not readable JSON ({exc}): LLMBar's own figures were not compared")
        return
    except InputError as exc:
        batch.warnings.append(f"{exc}: LLMBar's own figures were not compared")
        return
    if not isinstance(data, dict):
        batch.warnings.append(f"{stats}: not a JSON object: LLMBar's own figures were not compared")
        return
    if not data:  # nothing to compare is not parity
        batch.warnings.append(f"{stats}: an empty object, no figure in it: LLMBar's own figures were not compared")
        return
    ours = llmbar_stats.repository_statistics(labels, win_false, win_true)
    theirs = dict(data)
    diffs: list[str] = []
    if "correct_average" in theirs:
        value = theirs.pop("correct_average")
        try:
            share = correct_average_share(value)
        except (ValueError, TypeError) as exc:
            batch.warnings.append(f"{stats}: no readable correct_average ({exc}): LLMBar's own accuracy was not compared")
        else:
            mine = float(ours["correct_average"].rstrip("%")) / 100 if ours else float("nan")
            if not math.isclose(share, mine, abs_tol=5e-4):
                diffs.append(f"correct_average: the file says {value!r}, judgecal gives {ours.get('correct_average')!r}")
                batch.warnings.append(
                    f"{stats}: LLMBar's correct_average is {share:.4f} but the imported "
                    f"{'scores' if is_rating_protocol(protocol) else 'verdicts'} give {mine:.4f} (LLMBar's definition: "
                    f"the mean over both orders) over {len(labels)} pairs: check the files belong together")
    other = llmbar_stats.compare(ours, theirs)
    if other:
        batch.warnings.append(f"{stats}: LLMBar's own figures differ from those of the imported "
                              f"{'scores' if is_rating_protocol(protocol) else 'verdicts'}: " + "; ".join(other))
    if parity is not None:
        parity.append({"file": str(stats), "task_family": fam, "judge": spec.name, "llmbar_judge": judge,
                       "protocol": protocol, "n_pairs": len(labels), "figures": ours, "file_figures": data,
                       "differences": diffs + other})


def _rating(f: Fields, judge: JudgeSpec, ref: RespRef, value, key: str) -> dict:
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    raw = "" if value is None else str(value)
    problem = unstorable(raw)
    if problem:  # stored as the rating's raw output
        raise f.fail(f"results[-1][{key!r}] {problem}")
    row = {"judge": judge, "response": ref, "sample_index": 0, "raw_output": raw}
    if not _SCORE.fullmatch(raw.strip()):  # ASCII digits only: float() also reads '1_0', '1e1', '٧', 'nan'
        return dict(row, status="unparsed", score=None, error=f"{key} is {raw!r} in the source file (not a number "
                                                               "written in digits)")
    score = float(raw)
    if not judge.scale_min <= score <= judge.scale_max:
        raise f.fail(f"{key} {score:g} is outside the declared scale {judge.scale_min:g}-{judge.scale_max:g}")
    return dict(row, status="ok", score=score, error=None)
