"""Multiple-choice task loading: JSONL, the HellaSwag text format, lm-evaluation-harness YAML.

Every loader returns an :class:`McTask`: a list of :class:`McItem` (context string, raw choice
strings, gold index) plus the target delimiter put between context and choice. Requests are
``(context, target_delimiter + choice)`` exactly as lm-evaluation-harness builds them for
``output_type: multiple_choice`` (``lm_eval/api/task.py`` ``ConfigurableTask.construct_requests``);
length denominators are taken on the raw choice string, without the delimiter.

Bad records raise :class:`~judgecal.errors.InputError` as ``FILE:LINE: reason``.
"""

from __future__ import annotations

import ast
import bz2
import gzip
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from judgecal.errors import InputError, UsageError
from judgecal.importers.records import DuplicateKey, unique_keys
from judgecal.yamlkeys import UniqueKeyLoader, is_repeat

DEFAULT_PROMPT = "{query}\nAnswer:"


@dataclass(frozen=True)
class McItem:
    """One question: ``context`` (the prompt string), ``choices`` (raw strings; the scored
    continuation is ``target_delimiter + choice``), ``gold`` (index into choices), ``line``
    (1-based source line or record number, for messages)."""

    context: str
    choices: tuple[str, ...]
    gold: int
    line: int = 0


@dataclass
class McTask:
    """A loaded task: ``name``, ``items``, ``target_delimiter`` (default " "), the source
    ``path``, its ``format`` ("jsonl", "hellaswag", "lm-eval-yaml") and ``metrics`` requested
    (lm-eval ``metric_list`` names; empty = all) and, for a YAML task, its ``data_path``."""

    name: str
    items: list[McItem]
    target_delimiter: str = " "
    path: Path | None = None
    format: str = "jsonl"
    metrics: list[str] = field(default_factory=list)
    data_path: Path | None = None  # the data file a YAML task reads (None for other formats)


def _open_text(path: Path):
    if path.suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _json_lines(path: Path, src: str, what: str):
    """(line number, decoded JSON value) of every non-blank line of a (possibly .bz2/.gz)
    JSONL file, decoded line by line so an error names its line. Raises InputError naming
    FILE:LINE for an unreadable file, non-UTF-8 bytes or invalid JSON."""
    opener = {".bz2": bz2.open, ".gz": gzip.open}.get(path.suffix, open)
    try:
        fh = opener(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", source=src) from exc
    with fh:
        lineno = 0
        try:
            for lineno, data in enumerate(fh, 1):
                try:
                    raw = data.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(f"not UTF-8 text ({exc.reason})", source=src, line=lineno) from None
                if not raw.strip():
                    continue
                try:
                    yield lineno, json.loads(raw, object_pairs_hook=unique_keys)
                except json.JSONDecodeError as exc:
                    raise InputError(f"invalid JSON: {exc.msg}", source=src, line=lineno) from exc
                except DuplicateKey as exc:  # json.loads would keep the last value silently
                    raise InputError(str(exc), source=src, line=lineno) from None
        except (OSError, EOFError) as exc:  # a corrupt .bz2/.gz stream
            raise InputError(f"cannot read {what}: {exc}", source=src, line=lineno + 1) from None


def _check_record(rec: Any, src: str, line: int) -> tuple[str, list[str], int]:
    if not isinstance(rec, dict):
        raise InputError("expected a JSON object with query, choices, gold", source=src, line=line)
    for key in ("query", "choices", "gold"):
        if key not in rec:
            raise InputError(f"missing field {key!r}", source=src, line=line)
    other = sorted(k for k in rec if k not in ("query", "choices", "gold"))
    if other:  # a misspelt or extra field would be passed over: the format has these three only
        raise InputError(f"field {other[0]!r} is not one of query, choices, gold (the task format's fields; "
                         "nothing else is read)", source=src, line=line)
    query, choices, gold = rec["query"], rec["choices"], rec["gold"]
    if not isinstance(query, str):
        raise InputError("field 'query' must be a string", source=src, line=line)
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        raise InputError("field 'choices' must be a list of at least 2 strings", source=src, line=line)
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
        raise InputError(f"field 'gold' must be an index in 0..{len(choices) - 1}, got {gold!r}",
                         source=src, line=line)
    if any(c == "" for c in choices):
        raise InputError("a choice is the empty string (nothing to score)", source=src, line=line)
    return query, choices, gold


def check_prompt(prompt: str) -> None:
    """Raise UsageError unless ``prompt`` is a format string whose only fields are plain
    ``{query}`` (at least one; no attribute, index, conversion or format spec): a prompt without
    the query would give every item the same context."""
    try:
        fields = [(name, conv, spec) for _, name, spec, conv in string.Formatter().parse(prompt) if name is not None]
    except ValueError as exc:
        raise UsageError(f"--prompt {prompt!r} is not a format string with {{query}} only ({exc})") from None
    if not fields:
        raise UsageError(f"--prompt {prompt!r} has no {{query}}: every item would get the same context")
    bad = [name for name, conv, spec in fields if name != "query" or conv or spec]
    if bad:
        raise UsageError(f"--prompt {prompt!r} may only use plain {{query}}, found {{{bad[0]}...}}")


def load_jsonl(path: str | Path, *, prompt: str = DEFAULT_PROMPT, target_delimiter: str = " ",
               limit: int | None = None) -> McTask:
    """Load a JSONL task, one ``{"query": str, "choices": [str, ...], "gold": int}`` a line
    (the llm-foundry format of ../shared/data/mc). The context is ``prompt.format(query=...)``
    (default ``"{query}\\nAnswer:"``); blank lines are skipped. Raises InputError
    ``FILE:LINE: reason`` on bad JSON or a bad record, and for an empty file."""
    check_prompt(prompt)
    path = Path(path)
    src = str(path)
    items: list[McItem] = []
    for lineno, rec in _json_lines(path, src, "task file"):
        query, choices, gold = _check_record(rec, src, lineno)
        try:
            context = prompt.format(query=query)
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(f"--prompt {prompt!r} is not a format string with {{query}} only ({exc})") from None
        items.append(McItem(context, tuple(choices), gold, lineno))
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise InputError("no items in task file", source=src)
    return McTask(path.name.split(".")[0], items, target_delimiter, path, "jsonl")


def hellaswag_preprocess(text: str) -> str:
    """lm-evaluation-harness ``lm_eval/tasks/hellaswag/utils.py`` ``preprocess``, verbatim:
    strip, " [title]" -> ". ", drop any "[...]", then replace double spaces (one pass)."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


_LAST_SENTENCE = re.compile(r"^(.*[.!?] )?([a-z].*)$", re.S)


def hellaswag_query(line: str) -> str:
    """The lm-eval HellaSwag query from a text-format context line ``activity: ctx``.

    lm-eval builds ``preprocess(activity + ": " + ctx_a + " " + ctx_b.capitalize())``. The text
    format carries ``ctx = ctx_a + " " + ctx_b`` already joined, with ``ctx_b`` not capitalised.
    ``ctx_b`` is recovered as the final fragment after the last sentence end (". ", "! ", "? ")
    when it starts with a lower-case letter (ctx_a sentences start upper-case), and
    ``str.capitalize()`` is applied to it, as lm-eval does (which also lower-cases the rest of
    the fragment). A final fragment that starts upper-case is left alone (ctx_b empty or
    already capitalised). The activity label is everything before the first ": "."""
    activity, sep, ctx = line.partition(": ")
    if not sep:
        activity, ctx = "", line
    m = _LAST_SENTENCE.match(ctx)
    if m:
        ctx = (m.group(1) or "") + m.group(2).capitalize()
    return hellaswag_preprocess(f"{activity}: {ctx}" if sep else ctx)


def load_hellaswag_text(path: str | Path, *, limit: int | None = None) -> McTask:
    """Load the HellaSwag text format (klosax/hellaswag_text_data; may be .bz2/.gz): 6 lines an
    item: ``activity: context``, the gold index, then the 4 endings. Query per
    :func:`hellaswag_query`, endings through :func:`hellaswag_preprocess`, delimiter " " (as
    lm-eval's ``hellaswag.yaml``: ``doc_to_text: "{{query}}"``, ``doc_to_choice: choices``).
    Raises InputError ``FILE:LINE`` for a bad gold line or a truncated last item."""
    path = Path(path)
    src = str(path)
    items: list[McItem] = []
    try:
        fh = _open_text(path)
        lines = fh.read().split("\n")
        fh.close()
    except OSError as exc:
        raise InputError(f"cannot read task file: {exc.strerror}", source=src) from exc
    if lines and lines[-1] == "":
        lines.pop()
    for start in range(0, len(lines), 6):
        block = lines[start:start + 6]
        if len(block) < 6:
            raise InputError(f"truncated item: {len(block)} of 6 lines", source=src, line=start + 1)
        gold_text = block[1].strip()
        if not gold_text.isdigit() or int(gold_text) > 3:
            raise InputError(f"gold line must be 0..3, got {block[1]!r}", source=src, line=start + 2)
        endings = tuple(hellaswag_preprocess(e) for e in block[2:6])
        for k, e in enumerate(endings):
            if not e:
                raise InputError("empty ending", source=src, line=start + 3 + k)
        items.append(McItem(hellaswag_query(block[0]), endings, int(gold_text), start + 1))
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise InputError("no items in task file", source=src)
    return McTask("hellaswag", items, " ", path, "hellaswag")


# ---------------------------------------------------------------- lm-evaluation-harness YAML

SUPPORTED_YAML_KEYS = {
    "task", "tag", "group", "output_type", "dataset_path", "dataset_name", "dataset_kwargs",
    "test_split", "validation_split", "training_split", "fewshot_split", "num_fewshot",
    "doc_to_text", "doc_to_choice", "doc_to_target", "target_delimiter", "fewshot_delimiter",
    "description", "metric_list", "metadata", "should_decontaminate", "doc_to_decontamination_query",
}
SUPPORTED_METRICS = {"acc", "acc_norm", "acc_bytes", "acc_mutual_info"}


class _FunctionTag(str):
    """Stands for a ``!function module.name`` value (Python code we do not run)."""


class _Loader(UniqueKeyLoader):
    """YAML as lm-eval writes it (``!function`` kept as a tag), refusing a mapping that gives a
    key twice (PyYAML keeps the last value silently)."""


def check_yaml_keys(path: Path) -> None:
    """Raise InputError naming FILE:LINE when the YAML file at ``path`` gives a key twice in one
    mapping (lm-eval's loader, like PyYAML, keeps the last value silently). Other problems are
    left to the loader that reads the file (its own messages)."""
    try:
        yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_RepeatCheck)
    except yaml.constructor.ConstructorError as exc:
        if is_repeat(exc):
            mark = exc.problem_mark
            raise InputError(f"invalid YAML: {exc.problem}", source=str(path), line=mark.line + 1 if mark else None) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        pass


class _RepeatCheck(_Loader):
    """:class:`_Loader` that reads any tag as plain data (lm-eval's files may carry others)."""


_RepeatCheck.add_multi_constructor("!", lambda loader, suffix, node: None)


_Loader.add_constructor("!function", lambda loader, node: _FunctionTag(loader.construct_scalar(node)))

_JINJA = jinja2.Environment(loader=jinja2.BaseLoader(), undefined=jinja2.StrictUndefined,
                            keep_trailing_newline=True)
_JINJA.filters["regex_replace"] = lambda s, pattern, repl, count=0: re.sub(pattern, repl, s, count=count)


def _render(template: str, doc: dict) -> str:
    """lm_eval/utils.py ``apply_template``: Jinja with StrictUndefined, trailing newline kept."""
    return _JINJA.from_string(template).render(**doc)


def _doc_to_text(spec: Any, doc: dict) -> Any:
    if isinstance(spec, int):
        return spec
    if spec in doc:
        return doc[spec]
    return _render(spec, doc)


def _doc_to_choice(spec: Any, doc: dict) -> list:
    # lm_eval/api/task.py ConfigurableTask.doc_to_choice
    if isinstance(spec, str):
        if spec in doc:
            return doc[spec]
        return ast.literal_eval(_render(spec, doc))
    if isinstance(spec, list):
        return spec
    if isinstance(spec, dict):
        return list(spec.values())
    raise TypeError(f"doc_to_choice of type {type(spec).__name__}")


def _doc_to_target(spec: Any, doc: dict) -> Any:
    # lm_eval/api/task.py ConfigurableTask.doc_to_target (doc_to_choice is always set here)
    if isinstance(spec, int):
        return spec
    if spec in doc:
        return doc[spec]
    s = _render(spec, doc)
    if s.isdigit():
        return ast.literal_eval(s)
    if len(s) >= 2 and s[0] == "[" and s[-1] == "]":
        try:
            return ast.literal_eval(s)
        except (SyntaxError, ValueError):
            return s
    return s


def load_lm_eval_yaml(path: str | Path, *, limit: int | None = None) -> McTask:
    """Load a custom lm-evaluation-harness task YAML with ``output_type: multiple_choice`` and
    ``dataset_path: json`` (``dataset_kwargs.data_files``: a path or ``{split: path}``; relative
    paths are taken relative to the YAML file). Split: ``test_split``, else
    ``validation_split``, else the only split. Context = ``description`` + ``doc_to_text``
    (0-shot only); choices = ``doc_to_choice``; gold = ``doc_to_target`` (an index, or a choice
    string), with lm-eval's field-name / Jinja semantics (``lm_eval/api/task.py``).

    Raises InputError naming the key for an unsupported key or value (``process_docs``,
    ``!function``, other dataset sources, few-shot, unknown metrics), and ``FILE:LINE`` for bad
    records in the data file."""
    path = Path(path)
    src = str(path)
    try:
        cfg = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except OSError as exc:
        raise InputError(f"cannot read task file: {exc.strerror}", source=src) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML: {getattr(exc, 'problem', exc)}", source=src,
                         line=mark.line + 1 if mark else None) from exc
    if not isinstance(cfg, dict):
        raise InputError("a task YAML must be a mapping", source=src)
    for key, value in cfg.items():
        if key not in SUPPORTED_YAML_KEYS:
            raise InputError(f"unsupported lm-evaluation-harness task key {key!r}", source=src)
        if isinstance(value, _FunctionTag):
            raise InputError(f"key {key!r}: '!function {value}' (Python code) is not supported", source=src)
    if cfg.get("output_type") != "multiple_choice":
        raise InputError(f"key 'output_type': only multiple_choice is supported, got {cfg.get('output_type')!r}",
                         source=src)
    if cfg.get("dataset_path") not in ("json", "jsonl"):
        raise InputError(f"key 'dataset_path': only 'json' (with dataset_kwargs.data_files) is supported, "
                         f"got {cfg.get('dataset_path')!r}", source=src)
    if cfg.get("dataset_name") not in (None, ""):
        raise InputError("key 'dataset_name': not supported with dataset_path json", source=src)
    if cfg.get("num_fewshot") not in (None, 0):
        raise InputError("key 'num_fewshot': only 0-shot is supported", source=src)
    for key in ("doc_to_text", "doc_to_choice", "doc_to_target"):
        if key not in cfg:
            raise InputError(f"missing key {key!r}", source=src)
    kwargs = cfg.get("dataset_kwargs") or {}
    if not isinstance(kwargs, dict) or set(kwargs) - {"data_files"}:
        extra = sorted(set(kwargs) - {"data_files"}) if isinstance(kwargs, dict) else ["(not a mapping)"]
        raise InputError(f"key 'dataset_kwargs': unsupported entry {extra[0]!r} (only data_files)", source=src)
    data_files = kwargs.get("data_files")
    if data_files is None:
        raise InputError("key 'dataset_kwargs.data_files' is required with dataset_path json", source=src)
    if isinstance(data_files, dict):
        split = cfg.get("test_split") or cfg.get("validation_split")
        if split is None:
            if len(data_files) != 1:
                raise InputError("key 'test_split': several data_files splits and none chosen", source=src)
            split = next(iter(data_files))
        if split not in data_files:
            raise InputError(f"key 'dataset_kwargs.data_files': no split {split!r}", source=src)
        data_file = data_files[split]
    else:
        data_file = data_files
    if isinstance(data_file, list):
        if len(data_file) != 1:
            raise InputError("key 'dataset_kwargs.data_files': give one file per split", source=src)
        data_file = data_file[0]
    data_path = Path(data_file)
    if not data_path.is_absolute():
        data_path = path.parent / data_path
    metrics: list[str] = []
    for entry in cfg.get("metric_list") or []:
        name = entry.get("metric") if isinstance(entry, dict) else entry
        if name not in SUPPORTED_METRICS:
            raise InputError(f"key 'metric_list': unsupported metric {name!r} "
                             f"(supported: {', '.join(sorted(SUPPORTED_METRICS))})", source=src)
        metrics.append(name)
    delimiter = cfg.get("target_delimiter", " ")
    description = cfg.get("description") or ""
    dsrc = str(data_path)
    items: list[McItem] = []
    for lineno, doc in _json_lines(data_path, dsrc, "data file"):
        if not isinstance(doc, dict):
            raise InputError("expected a JSON object", source=dsrc, line=lineno)
        try:
            text = _doc_to_text(cfg["doc_to_text"], doc)
            choices = _doc_to_choice(cfg["doc_to_choice"], doc)
            target = _doc_to_target(cfg["doc_to_target"], doc)
            desc = _render(description, doc) if description else ""
        except jinja2.TemplateError as exc:
            raise InputError(f"template error: {exc}", source=dsrc, line=lineno) from exc
        except (ValueError, SyntaxError, TypeError) as exc:
            raise InputError(f"doc_to_choice did not give a list: {exc}", source=dsrc, line=lineno) from exc
        if not isinstance(text, str):
            raise InputError("doc_to_text must give a string (multiple_input is not supported)",
                             source=dsrc, line=lineno)
        if not isinstance(choices, (list, tuple)) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise InputError("doc_to_choice must give a list of at least 2 strings", source=dsrc, line=lineno)
        if isinstance(target, str):
            if target not in choices:
                raise InputError(f"doc_to_target {target!r} is not one of the choices", source=dsrc, line=lineno)
            target = list(choices).index(target)
        if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < len(choices):
            raise InputError(f"doc_to_target must give an index in 0..{len(choices) - 1}, got {target!r}",
                             source=dsrc, line=lineno)
        items.append(McItem(desc + text, tuple(choices), target, lineno))
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise InputError("no items in data file", source=dsrc)
    return McTask(str(cfg.get("task") or path.stem), items, delimiter, path, "lm-eval-yaml", metrics, data_path)


def load_task(path: str | Path, *, prompt: str = DEFAULT_PROMPT, limit: int | None = None) -> McTask:
    """Load a task file by its name: ``.yaml``/``.yml`` -> :func:`load_lm_eval_yaml`;
    ``.txt``/``.txt.bz2``/``.txt.gz`` -> :func:`load_hellaswag_text`; anything else ->
    :func:`load_jsonl` (``prompt`` applies to JSONL only). Raises InputError."""
    path = Path(path)
    if not path.exists():
        raise InputError("task file does not exist", source=str(path))
    name = path.name.lower()
    if name.endswith((".yaml", ".yml")):
        return load_lm_eval_yaml(path, limit=limit)
    if re.search(r"\.txt(\.bz2|\.gz)?$", name):
        return load_hellaswag_text(path, limit=limit)
    return load_jsonl(path, prompt=prompt, limit=limit)
