"""lm-evaluation-harness task configs run by lm-eval's own task machinery, scored by judgecal.

A task is named as lm-eval users name it: a task, group or tag name (``arc_challenge``,
``mmlu``, ``mmlu_anatomy``; lm-eval's shipped tasks plus ``include_paths``) or a task YAML
file. lm-eval (0.4.13) builds everything: ``TaskManager`` reads the configs (``include:``,
``!function``, ``process_docs``, ``doc_to_*`` templates/lists/fields/functions,
``description``, delimiters, ``task_alias``, ``tag``/``group``, group configs with
``aggregate_metric_list``), ``ConfigurableTask`` loads the data and builds every request (few-shot
contexts with lm-eval's sampler and seed, WinoGrande's multiple-input form, acc_mutual_info's
unconditional requests), and ``lm_eval.evaluator.evaluate`` computes the metrics (metric_list,
group aggregation weighted as lm-eval weights it). judgecal replaces only the model pass:
:class:`~judgecal.loglik.lmeval_lm.JudgecalLM` answers lm-eval's ``loglikelihood`` call.

What judgecal adds around it:

- **Task files.** A YAML file is read as lm-eval reads it (``lm_eval.tasks._yaml_loader.load_yaml``)
  with two additions for files outside lm-eval's tree: an ``include:`` that is not found beside
  the file is looked up among lm-eval's shipped task files (a path under ``lm_eval/tasks``
  such as ``arc/arc_easy.yaml``, or a file name found once there, such as ``arc_easy.yaml``);
  and a relative ``dataset_path``, ``dataset_kwargs.data_files`` or ``dataset_kwargs.data_dir``
  that does not exist relative to the working directory but does relative to the YAML file is
  taken relative to the YAML file. YAMLs in ``include_paths`` get the same ``include:``
  fallback (lm-eval's index would drop them); those that do not load at all are refused when
  they define the requested name, else skipped with a note (:func:`_rescue_include_paths`).
  A ``!function`` module that raises on import is one line naming the YAML and the module.
- **Offline data.** While tasks load, ``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE`` are on, so
  nothing is downloaded: data come from the datasets library's local formats (json, csv,
  parquet with ``data_files``), a local folder (``dataset_path: /path/to/copy``), the local copy
  of a Hub dataset folder named by ``dataset_path`` under ``data_dir`` (``DATA_DIR/allenai/ai2_arc``)
  or given in ``datasets_map`` (``{"allenai/ai2_arc": "/path"}``), or the datasets cache (a local
  folder is cached under a key of its files, :func:`local_cache_dir`). When
  the data cannot be found, one line names the dataset, the config and where it looked
  (:class:`DataNotFoundError`).
- **Checks.** Only ``output_type: multiple_choice`` tasks, or ``loglikelihood_rolling``
  (perplexity) tasks, not both in one call (:mod:`judgecal.loglik.lmeval_rolling`), are scored
  (others are refused by name, from the configs, before any data are read); ``--data-dir``/``--dataset`` folders
  must exist and every ``--dataset`` key must be read by some task; a few-shot count larger
  than the few-shot pool is refused before the model loads (:func:`check_fewshot_pool`). Items whose gold lm-eval scores but judgecal's own formats would refuse (several gold
  answers, a gold string that is not a choice, an index out of range) are scored as lm-eval
  scores them and counted in the notes.
- **Extras.** judgecal's metrics that the task's metric_list does not name (acc_norm,
  acc_bytes, acc_per_token) are computed from the same log-likelihoods and marked as extras.
- **Provenance.** The SHA-256 of the resolved task configs, of the scored documents and of
  every request, the few-shot settings, the seed and the lm-eval version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import hashlib
import json
import logging
import os
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from judgecal.errors import InputError, JudgecalError, UsageError
from judgecal.loglik.tasks import check_yaml_keys

LM_EVAL_HINT = "install lm-evaluation-harness: pip install 'judgecal[lmeval]'"
# lm_eval.defaults: DEFAULT_RANDOM_SEED (python random) and DEFAULT_OTHER_SEED (numpy, torch, few-shot sampler)
DEFAULT_RANDOM_SEED = 0
DEFAULT_FEWSHOT_SEED = 1234
DEFAULT_BOOTSTRAP_ITERS = 100000  # lm-eval's default (stderr of non-mean metrics such as f1, mcc)
JUDGECAL_METRICS = ("acc", "acc_norm", "acc_bytes", "acc_per_token")  # extras where metric_list lacks them


class DataNotFoundError(InputError):
    """A task's dataset could not be found offline; the message names it and where judgecal looked."""


def available() -> bool:
    """True when lm-evaluation-harness can be imported."""
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        return False
    return True


def require() -> None:
    """Raise UsageError with the install hint unless lm-eval can be imported."""
    if not available():
        raise UsageError(f"lm-evaluation-harness task names and YAML configs need lm-eval; {LM_EVAL_HINT}")


def lm_eval_version() -> str | None:
    """The installed lm-eval version (None when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lm_eval")
    except PackageNotFoundError:
        return None


def shipped_tasks_dir() -> Path:
    """lm-eval's own task folder (``lm_eval/tasks``)."""
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).parent


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ---------------------------------------------------------------- task files
def _find_include(inc: str, base: Path, src: str) -> Path:
    p = Path(str(inc)).expanduser()
    if p.is_absolute():
        if p.is_file():
            return p
        raise InputError(f"include {inc!r} does not exist", source=src)
    if (base / p).is_file():
        return base / p
    shipped = shipped_tasks_dir()
    if (shipped / p).is_file():
        return shipped / p
    matches = sorted(q for q in shipped.rglob(p.name) if q.is_file() and "__pycache__" not in q.parts)
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        rel = ", ".join(str(m.relative_to(shipped)) for m in matches[:3])
        raise InputError(f"include {inc!r} is ambiguous: {len(matches)} shipped lm-eval task files have that name "
                         f"({rel}, ...); give the path under lm_eval/tasks", source=src)
    raise InputError(f"include {inc!r} not found (looked in {base} and in lm-eval's shipped tasks {shipped})",
                     source=src)


def _user_frame(exc: BaseException) -> tuple[str, int] | None:
    """The innermost traceback frame of ``exc`` in a task's own Python code (a ``utils.py`` beside
    a YAML, or one of lm-eval's shipped task modules), as (file, line); None when every frame
    is in installed libraries, the standard library or judgecal."""
    import sysconfig
    import traceback

    skip = {str(Path(v).resolve()) for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib",
                                                                                        "platlib")}
    skip.add(str(Path(__file__).resolve().parents[1]))  # judgecal itself
    skip.add(str(shipped_tasks_dir().parent))  # lm-eval itself (its tasks folder excepted below)
    tasks = str(shipped_tasks_dir()) + os.sep
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        f = frame.f_code.co_filename
        if not f.endswith(".py"):
            continue
        task_module = f.startswith(tasks) and os.sep in f[len(tasks):]  # lm_eval/tasks/<task>/utils.py
        if task_module or not any(f.startswith(d + os.sep) for d in skip):
            found = (f, line)
    return found


def function_import_error(exc: BaseException) -> tuple[str | None, str] | None:
    """When ``exc`` was raised while lm-eval imported the module of a ``!function`` (its
    ``_import_func_in_yml``/``_load_module_with_cache``): (the YAML that names the function or
    None, a one-line reason naming the function, the module file and the exception, with the
    module's line where known). None for any other exception."""
    import traceback

    yaml_path = qual = module = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        name, loc = frame.f_code.co_name, frame.f_locals
        if name == "load_yaml" and "path" in loc:
            yaml_path = str(loc["path"])
        elif name == "_import_func_in_yml":
            qual = loc.get("qual")
        elif name in ("_load_module_with_cache", "_import_fun_from_str") and loc.get("module_path") is not None:
            module = str(loc["module_path"])
    if module is None:
        return None
    where = _user_frame(exc)
    at = f" (at {where[0]}:{where[1]})" if where and where[0] == module else ""
    what = f"!function {qual}" if qual else "!function"
    return yaml_path, f"{what}: importing {module} raised {_one_line(exc)[:300]}{at}"


def _shipped(path: Path) -> bool:
    """Whether ``path`` is one of lm-eval's own task files (inside the installed package)."""
    import lm_eval

    try:
        return Path(path).resolve().is_relative_to(Path(lm_eval.__file__).resolve().parent)
    except OSError:
        return False


def _load_yaml(path: Path, *, recursive: bool, resolve_func: bool = True) -> dict:
    """lm-eval's ``load_yaml`` (``!function`` resolved beside the file unless ``resolve_func``
    is False) with one-line errors: ``FILE[:LINE]: reason``; an exception raised while a
    ``!function`` module is imported names the YAML, the module file and the exception."""
    import yaml
    from lm_eval.tasks._yaml_loader import load_yaml

    src = str(path)
    if not _shipped(path):  # a key given twice in the user's own YAML: FILE:LINE (lm-eval keeps the last value
        check_yaml_keys(path)  # silently); lm-eval's shipped files are read as lm-eval reads them (tinyMMLU gives
        # num_fewshot twice), for parity
    try:
        cfg = load_yaml(path, resolve_func=resolve_func, recursive=recursive)
    except OSError as exc:
        raise InputError(f"cannot read task file: {exc.strerror or exc}", source=src) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", source=src,
                         line=mark.line + 1 if mark else None) from None
    except (Exception, SystemExit) as exc:  # a !function module that fails to import, include cycle, ...
        hit = function_import_error(exc)
        if hit is not None:
            raise InputError(hit[1], source=hit[0] or src) from None
        if isinstance(exc, (ImportError, AttributeError)):  # a !function that cannot be found
            raise InputError(f"!function: {_one_line(exc)}", source=src) from None
        if isinstance(exc, ValueError):  # not a mapping, include cycle, bad !function reference
            raise InputError(_one_line(exc), source=src) from None
        raise InputError(f"cannot load task file: {_one_line(exc)[:300]}", source=src) from None
    if not isinstance(cfg, dict):  # lm-eval checks this too; kept for older versions
        raise InputError(f"not a YAML mapping ({type(cfg).__name__})", source=src)
    return cfg


def load_yaml_tree(path: str | Path, *, resolve_func: bool = True, _chain: tuple[Path, ...] = ()) -> dict:
    """A task YAML with its ``include:`` chain merged as lm-eval's ``load_yaml(recursive=True)``
    merges it (included files first, in order, then the file's own keys; an included file's
    ``task_list`` dropped), except that an ``include:`` not found beside the including file is
    looked up among lm-eval's shipped task files (:func:`_find_include`), at every level.
    ``resolve_func``: import ``!function`` values (else they stay path strings, as in lm-eval's
    index). Raises InputError ``FILE[:LINE]: reason`` (an include cycle included)."""
    path = Path(path).expanduser().resolve()
    if path in _chain:
        raise InputError(f"include cycle: {' -> '.join(str(p) for p in (*_chain, path))}", source=str(_chain[-1]))
    cfg = _load_yaml(path, recursive=False, resolve_func=resolve_func)
    includes = cfg.pop("include", None)
    if includes is None:
        return cfg
    merged: dict = {}
    for inc in includes if isinstance(includes, list) else [includes]:
        inc_cfg = load_yaml_tree(_find_include(inc, path.parent, str(path)), resolve_func=resolve_func,
                                 _chain=(*_chain, path))
        inc_cfg.pop("task_list", None)  # lm-eval: task_list defines tasks of the included file only
        merged.update(inc_cfg)
    merged.update(cfg)
    return merged


def _local_first(value: Any, base: Path) -> Any:
    """A relative path that exists beside the YAML but not in the working directory -> absolute."""
    if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
        if not Path(value).exists() and (base / value).exists():
            return str((base / value).resolve())
    return value


def load_task_file(path: str | Path) -> dict:
    """Read an lm-eval task or group YAML ``path`` into a config dict, as lm-eval's
    ``load_yaml`` does, plus the two additions in the module docstring (shipped ``include:``
    fallback; data paths relative to the YAML). ``!function`` values are resolved to the
    functions. Raises InputError ``FILE[:LINE]: reason``."""
    path = Path(path).expanduser().resolve()
    src = str(path)
    cfg = load_yaml_tree(path)
    base = path.parent
    if "dataset_path" in cfg:
        cfg["dataset_path"] = _local_first(cfg["dataset_path"], base)
    kwargs = cfg.get("dataset_kwargs")
    if isinstance(kwargs, dict):
        kwargs = dict(kwargs)
        if "data_dir" in kwargs:
            kwargs["data_dir"] = _local_first(kwargs["data_dir"], base)
        files = kwargs.get("data_files")
        if isinstance(files, (str, list)):
            files = {None: files}
        if isinstance(files, dict):
            fixed = {k: ([_local_first(f, base) for f in v] if isinstance(v, list) else _local_first(v, base))
                     for k, v in files.items()}
            kwargs["data_files"] = fixed[None] if list(fixed) == [None] else fixed
        cfg["dataset_kwargs"] = kwargs
    if not isinstance(cfg.get("task"), (str, list)) and "group" not in cfg and "class" not in cfg:
        raise InputError("not an lm-eval task config: no 'task' (or 'group') key", source=src)
    if cfg.get("metadata") is None:
        cfg["metadata"] = {}
    if isinstance(cfg["metadata"], dict):
        cfg["metadata"] = {**cfg["metadata"], "config_source": src}
    return cfg


@dataclasses.dataclass(frozen=True)
class YamlLoadFailure:
    """A YAML file in an include path that neither lm-eval nor judgecal could read: ``path``,
    ``message`` (one line, ``FILE[:LINE]: reason``) and ``names`` (the task, group or tag names
    its text appears to define, found by a line pattern since the file does not load)."""

    path: Path
    message: str
    names: tuple[str, ...]


_NAME_LINE = re.compile(r"^\s*(?:task|group|tag)\s*:\s*[\"']?([A-Za-z0-9_.:\-]+)[\"']?\s*(?:#.*)?$", re.M)


def _names_in_text(path: Path) -> tuple[str, ...]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    return tuple(dict.fromkeys(_NAME_LINE.findall(text)))


def _rescue_include_paths(tm: Any, roots: Sequence[Path]) -> list[YamlLoadFailure]:
    """Give the YAML files of ``roots`` (the include paths of ``tm``) that lm-eval's index
    skipped because they do not load the same ``include:`` fallback as a task file
    (:func:`load_yaml_tree`), and list those that still do not load.

    lm-eval's ``TaskIndex`` drops any YAML that raises while it reads it, with a debug log line
    only: an ``include: arc_easy.yaml`` that is not beside the file, a syntax error. Here every
    YAML under ``roots`` that is not in the index and that lm-eval's own ``load_yaml`` cannot
    read is read again with :func:`load_yaml_tree`; a task or group found so is added to
    ``tm``'s index (a later include path overrides an earlier one, as in lm-eval; a tag's tasks
    are merged) and built from the same loader (a ``TaskFactory`` whose ``_load_full_config``
    uses it for those files); the files that still fail are returned. A YAML that loads but
    defines no task or group (a template) is left alone, as lm-eval leaves it."""
    from lm_eval.tasks._factory import TaskFactory
    from lm_eval.tasks._index import Kind, TaskIndex
    from lm_eval.tasks._yaml_loader import load_yaml

    index = tm.task_index
    resolved = [r.resolve() for r in roots]

    def rank(p: Path | None) -> int:  # -1: lm-eval's shipped tasks, else the include path's position
        if p is None:
            return -1
        for i in range(len(resolved) - 1, -1, -1):
            if p.resolve().is_relative_to(resolved[i]):
                return i
        return -1

    indexed = {e.yaml_path.resolve() for e in index.values() if e.yaml_path is not None}
    failures: list[YamlLoadFailure] = []
    rescued: set[Path] = set()
    for i, root in enumerate(resolved):
        found: dict = {}
        for f in TaskIndex._iter_yaml_files(root):
            if f.resolve() in indexed:
                continue
            try:
                load_yaml(f, resolve_func=False, recursive=True)
                continue  # lm-eval reads it and left it out on purpose (no task key, a duplicate name)
            except Exception:  # noqa: BLE001 - read again below, with the reason kept
                pass
            try:
                cfg = load_yaml_tree(f, resolve_func=False)
                TaskIndex._kind_of(cfg)
            except InputError as exc:
                failures.append(YamlLoadFailure(f, str(exc), _names_in_text(f)))
                continue
            except ValueError:
                continue  # loads, but neither a task nor a group: a template for include:
            TaskIndex.process_cfg(cfg, f, found)
            rescued.add(f)
        for name, entry in found.items():
            old = index.get(name)
            if entry.kind == Kind.TAG and old is not None and old.kind == Kind.TAG:
                old.tags.update(entry.tags)
            elif old is None or rank(old.yaml_path) < i:
                index[name] = entry
    if rescued:
        class _Factory(TaskFactory):
            def _load_full_config(self, entry: Any, overrides: dict | None = None) -> dict:
                if entry.yaml_path is None or entry.yaml_path not in rescued:
                    return super()._load_full_config(entry, overrides)
                full = load_yaml_tree(entry.yaml_path, resolve_func=True)
                cfg = super()._load_full_config(dataclasses.replace(entry, yaml_path=None, cfg=full), overrides)
                cfg["metadata"]["config_source"] = str(entry.yaml_path)
                return cfg

        tm._factory = _Factory(meta=tm.metadata)
        kinds: dict = {}
        for name, e in index.items():
            kinds.setdefault(e.kind, []).append(name)
        tm._all_tasks = sorted(index)
        tm._all_subtasks = sorted(kinds.get(Kind.TASK, []) + kinds.get(Kind.PY_TASK, []))
        tm._all_groups = sorted(kinds.get(Kind.GROUP, []))
        tm._all_tags = sorted(kinds.get(Kind.TAG, []))
    return failures


@functools.lru_cache(maxsize=8)
def _task_manager(include_paths: tuple[str, ...], include_defaults: bool, metadata_json: str = "null"):
    from lm_eval.tasks import TaskManager

    logged: Counter[str] = Counter()
    with quiet_lm_eval(logged):  # lm-eval's index warnings (a name overriding another) go to the run's notes
        tm = TaskManager(include_path=list(include_paths) or None, include_defaults=include_defaults,
                         metadata=json.loads(metadata_json))
    tm.judgecal_load_failures = _rescue_include_paths(tm, [Path(p) for p in include_paths])
    tm.judgecal_warnings = logged
    return tm


def task_manager(include_paths: Sequence[str | Path] = (), *, include_defaults: bool = True,
                 metadata: Mapping[str, Any] | None = None):
    """An lm-eval ``TaskManager`` over the shipped tasks (``include_defaults``) and
    ``include_paths`` (``metadata``: lm-eval's ``--metadata``, merged into every task's config
    metadata), built once per process for the same arguments (indexing the shipped
    tasks takes seconds). YAMLs in ``include_paths`` get the shipped ``include:`` fallback of
    task files (:func:`_rescue_include_paths`); those that still do not load are listed in the
    manager's ``judgecal_load_failures`` (:class:`YamlLoadFailure`), since lm-eval skips them
    without a word. Raises InputError for an include path that is not a folder."""
    paths = []
    for p in include_paths:
        q = Path(p).expanduser()
        if not q.is_dir():
            raise InputError("--include-path is not a folder", source=str(q))
        paths.append(str(q.resolve()))
    return _task_manager(tuple(paths), include_defaults, json.dumps(dict(metadata) if metadata else None,
                                                                    sort_keys=True, default=str))


# ---------------------------------------------------------------- offline data
def _hub_id(path: Any) -> bool:
    """A ``dataset_path`` that names a Hub dataset (``owner/name`` or ``name``), not a local path
    or a datasets builder (json, csv, parquet, ...)."""
    if not isinstance(path, str) or not path or path.startswith((".", "/", "~")) or os.path.exists(path):
        return False
    if "/" not in path:
        from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

        if path in _PACKAGED_DATASETS_MODULES:  # the datasets library's own builders: json, csv, parquet, ...
            return False
    return path.count("/") <= 1 and all(part for part in path.split("/"))


def local_cache_dir(folder: Path) -> Path:
    """Where the datasets library caches a local dataset folder while :func:`offline_data` is
    active: ``HF_DATASETS_CACHE/judgecal-local/<key>``, the key a SHA-256 of the folder's
    absolute path and every file's relative path, size and modification time. The datasets
    library's own cache key for a folder with a README config list covers the README's
    patterns only, so an edited (or another) copy with the same folder name would be served
    from a stale cache; this key changes with the files."""
    import datasets

    h = hashlib.sha256(str(folder.resolve()).encode())
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"\0{f.relative_to(folder).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return Path(datasets.config.HF_DATASETS_CACHE) / "judgecal-local" / h.hexdigest()[:24]


@contextlib.contextmanager
def offline_data(data_dir: str | Path | None = None, datasets_map: Mapping[str, str | Path] | None = None,
                 sources: dict[str, str] | None = None) -> Iterator[None]:
    """While active: Hub and datasets offline (nothing is downloaded), ``datasets.load_dataset``
    reads a Hub dataset ``owner/name`` from ``datasets_map[owner/name]`` or
    ``data_dir/owner/name`` where that folder exists (else from the datasets cache; a local
    folder is cached under :func:`local_cache_dir`), and a
    dataset that cannot be loaded raises :class:`DataNotFoundError` naming the dataset, its
    config and where it looked. lm-eval's logging and progress bars are silenced (its warnings
    are collected by :func:`quiet_lm_eval`). ``sources``: a dict that receives, for every
    ``path`` asked of ``datasets.load_dataset`` (the Hub id, builder or folder, as given),
    where it was read from (a folder, "the datasets cache", or the path itself)."""
    import datasets
    import huggingface_hub.constants as hub_constants

    mapping = {str(k): Path(v).expanduser() for k, v in (datasets_map or {}).items()}
    root = Path(data_dir).expanduser() if data_dir is not None else None
    original = datasets.load_dataset

    def load_dataset(path: Any = None, name: Any = None, *args: Any, **kwargs: Any):
        looked: list[str] = []
        use = path
        if _hub_id(path):
            candidates = ([mapping[path]] if path in mapping else []) + ([root / path] if root is not None else [])
            for c in candidates:
                looked.append(str(c))
                if c.is_dir():
                    use = str(c)
                    break
            else:
                looked.append(f"the datasets cache {datasets.config.HF_DATASETS_CACHE}")
        elif isinstance(path, str) and kwargs.get("data_files") is not None:
            looked.append(f"data_files {kwargs['data_files']}")
        else:
            looked.append(str(path))
        if isinstance(use, str) and Path(use).expanduser().is_dir() and "cache_dir" not in kwargs:
            kwargs["cache_dir"] = str(local_cache_dir(Path(use).expanduser()))
        try:
            out = original(use, name, *args, **kwargs)
            if sources is not None and isinstance(path, str):
                sources[path] = str(use) if use != path else "the datasets cache" if _hub_id(path) else str(path)
            return out
        except (FileNotFoundError, ConnectionError, ValueError, datasets.exceptions.DatasetNotFoundError) as exc:
            what = f"dataset {path!r}" + (f" (config {name!r})" if name else "")
            raise DataNotFoundError(f"{what} not found offline: looked in {'; '.join(looked)} "
                                    f"(nothing is downloaded; give --data-dir DIR with DIR/{path if _hub_id(path) else 'OWNER/NAME'}, "
                                    f"--dataset {path if _hub_id(path) else 'OWNER/NAME'}=FOLDER, or a YAML overriding dataset_path) "
                                    f"[{_one_line(exc)[:200]}]") from None

    saved_env = {k: os.environ.get(k) for k in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")}
    saved = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    bars_off = datasets.utils.are_progress_bars_disabled()
    os.environ["HF_DATASETS_OFFLINE"] = os.environ["HF_HUB_OFFLINE"] = "1"
    datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    datasets.disable_progress_bars()
    datasets.load_dataset = load_dataset
    try:
        yield
    finally:
        datasets.load_dataset = original
        datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if not bars_off:
            datasets.enable_progress_bars()


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages[" ".join(record.getMessage().split())[:300]] += 1


@contextlib.contextmanager
def quiet_lm_eval(collected: Counter[str]) -> Iterator[None]:
    """Silence lm-eval's and datasets' console output (log lines, tqdm bars) while active;
    lm-eval's WARNING-or-worse messages are counted into ``collected`` (message -> count)."""
    import lm_eval.api.task as api_task

    logger = logging.getLogger("lm_eval")
    ds_logger = logging.getLogger("datasets")
    handler = _Collect()
    saved = (logger.propagate, logger.level, ds_logger.level, api_task.tqdm)
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    ds_logger.setLevel(logging.ERROR)
    api_task.tqdm = functools.partial(saved[3], disable=True)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = saved[0]
        logger.setLevel(saved[1])
        ds_logger.setLevel(saved[2])
        api_task.tqdm = saved[3]
        collected.update(handler.messages)


# ---------------------------------------------------------------- loading
@dataclasses.dataclass
class LoadedTasks:
    """What ``TaskManager.load`` built for one ``--task``: ``name`` (the task, group or tag; for
    several, their names joined by commas), ``kind`` ("task", "group", "tag"; "list" for
    several), ``task_dict`` (lm-eval's ``{"tasks", "groups",
    "group_map"}``), ``path`` (the YAML file, or None for a name), ``config_sha256`` (resolved
    configs before run-time settings; see :func:`config_sha256`), ``notes`` (one line each,
    carried into the run's notes: YAMLs of an include path that do not load and were skipped,
    an unused ``--data-dir``), ``data_sources`` (each dataset asked of ``datasets.load_dataset``
    -> the folder, "the datasets cache" or the builder/path it was read from), ``specs`` (one
    ``{"spec", "name", "kind", "path"}`` per requested task, group or tag, a pattern expanded)."""

    name: str
    kind: str
    task_dict: dict
    path: Path | None
    config_sha256: str
    notes: list[str] = dataclasses.field(default_factory=list)
    data_sources: dict[str, str] = dataclasses.field(default_factory=dict)
    specs: list[dict] = dataclasses.field(default_factory=list)

    @property
    def tasks(self) -> dict:
        """Leaf tasks, name -> lm-eval Task, in lm-eval's order."""
        return self.task_dict["tasks"]

    @property
    def groups(self) -> dict:
        """Groups, name -> lm-eval Group."""
        return self.task_dict.get("groups") or {}


def _is_task_file(spec: str) -> bool:
    return spec.lower().endswith((".yaml", ".yml"))


def set_lm_eval_seeds(random_seed: int | None = DEFAULT_RANDOM_SEED, numpy_seed: int | None = DEFAULT_FEWSHOT_SEED,
                      torch_seed: int | None = DEFAULT_FEWSHOT_SEED) -> None:
    """The global seeds lm-eval's ``simple_evaluate`` sets before it loads tasks (python
    ``random`` 0, numpy 1234, torch 1234 unless ``--seed`` says otherwise; None leaves that one
    unset, as lm-eval does): ``process_docs`` functions that shuffle see the same state as
    under lm-eval."""
    import numpy as np

    if random_seed is not None:
        random.seed(random_seed)
    if numpy_seed is not None:
        np.random.seed(numpy_seed)
    if torch_seed is not None:
        try:
            import torch
        except ImportError:
            return
        torch.manual_seed(torch_seed)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_value(value: Any) -> Any:
    """``value`` (a task or group config as lm-eval dumps it) as plain JSON data that is the
    same in every process: dicts, lists, strings and numbers as they are; a function (at any
    depth: lm-eval's ``to_dict`` turns top-level functions into their source but leaves those
    inside ``fewshot_config`` and other nested dicts as objects whose repr carries a memory
    address) as its module, qualified name and source text; a ``functools.partial`` as its
    function and arguments; a dataclass as its fields; anything else as its repr with memory
    addresses removed."""
    import inspect

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): stable_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [stable_value(v) for v in value]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True)) if isinstance(value, (set, frozenset)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return stable_value({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, functools.partial):
        return {"partial": stable_value(value.func), "args": stable_value(value.args),
                "keywords": stable_value(value.keywords)}
    if callable(value):
        target = value if inspect.isroutine(value) or isinstance(value, type) else type(value)
        name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__name__)}"
        try:
            source = inspect.getsource(target)
        except (TypeError, OSError):
            source = None
        out = {"function": name, "source": source}
        if target is not value:  # a callable object: its state too
            out["state"] = _ADDRESS.sub("", repr(value))
        return out
    return _ADDRESS.sub("", repr(value))


def config_sha256(task_dict: dict) -> str:
    """SHA-256 of the resolved configs of every task (lm-eval's ``dump_config``) and group,
    before run-time settings (num_fewshot) are applied, leaving out where the data are read
    from (``dataset_path``, ``dataset_kwargs``, the config file's own path): the data
    themselves are hashed apart (``dataset_sha256``). Functions count by their source text
    (:func:`stable_value`), so the hash is the same in every process for the same configs."""
    def clean(cfg: dict) -> dict:
        cfg = {k: v for k, v in cfg.items() if k not in ("dataset_path", "dataset_kwargs")}
        if isinstance(cfg.get("metadata"), dict):
            cfg["metadata"] = {k: v for k, v in cfg["metadata"].items() if k != "config_source"}
        return cfg

    body = {"tasks": {n: clean(t.config.to_dict(keep_callable=True)) for n, t in sorted(task_dict["tasks"].items())},
            "groups": {n: clean(g.to_dict() or {}) for n, g in sorted((task_dict.get("groups") or {}).items())}}
    return hashlib.sha256(json.dumps(stable_value(body), sort_keys=True).encode()).hexdigest()


def _leaf_configs(tm: Any, what: str | dict) -> tuple[dict[str, dict], bool, list[str]]:
    """The raw configs (``include:`` merged, ``!function`` unresolved) of every leaf task that
    ``tm.load([what])`` will build, worked out from lm-eval's index without building anything
    (so without loading any data): group members with the group's task-level keys and the
    member's own overrides merged as lm-eval's ``TaskFactory`` merges them, tags expanded.
    Returns (task name -> config, whether some leaf is a Python task class whose config is
    unknown here, member names a group lists that are in no index)."""
    from lm_eval.tasks._factory import GROUP_FIELD_NAMES
    from lm_eval.tasks._index import Kind, TaskIndex

    registry = tm.task_index
    out: dict[str, dict] = {}
    state = {"python": False}
    unknown: list[str] = []

    def entry_cfg(entry: Any) -> dict:
        if entry.cfg is not None:
            return dict(entry.cfg)
        return load_yaml_tree(entry.yaml_path, resolve_func=False) if entry.yaml_path else {}

    def leaf(entry: Any, overrides: Mapping | None) -> None:
        if entry.kind == Kind.PY_TASK:
            state["python"] = True
            return
        cfg = {**entry_cfg(entry), **(overrides or {})}
        out[str(cfg.get("task", entry.name))] = cfg

    def build(entry: Any, overrides: Mapping | None, depth: int) -> None:
        if depth > 20:
            raise ValueError("groups nested more than 20 deep")
        if entry.kind == Kind.TAG:
            for n in sorted(entry.tags):
                if n in registry:
                    leaf(registry[n], overrides)
        elif entry.kind == Kind.GROUP:
            group(entry.name, entry_cfg(entry), overrides, depth)
        else:
            leaf(entry, overrides)

    def group(name: str, raw: dict, overrides: Mapping | None, depth: int) -> None:
        merged = {**{k: v for k, v in raw.items() if k not in GROUP_FIELD_NAMES}, **(overrides or {})}
        members = raw.get("task")
        for item in members if isinstance(members, list) else []:
            if isinstance(item, dict) and "group" in item:
                if item["group"] in registry:
                    build(registry[item["group"]], {**merged, **{k: v for k, v in item.items() if k != "group"}},
                          depth + 1)
                else:
                    group(f"{name}::{item['group']}", item, merged, depth + 1)
                continue
            if isinstance(item, dict):
                base, item_over = item.get("task"), {**merged, **item}
            else:
                base, item_over = item, merged
            if base not in registry:
                if isinstance(item, str):
                    unknown.append(item)
                out[f"{name}::{base}"] = {**item_over, "task": f"{name}::{base}"}
                continue
            child = registry[base]
            if child.kind == Kind.TAG:
                for t in sorted(child.tags):
                    if t in registry:
                        leaf(registry[t], {"task": t, **item_over})
            elif child.kind == Kind.GROUP:
                build(child, item_over, depth + 1)
            else:
                leaf(child, {"task": base, **item_over})

    if isinstance(what, dict):
        kind = TaskIndex._kind_of(what)
        if kind == Kind.GROUP:
            group(str(what["group"]), what, None, 0)
        elif kind == Kind.PY_TASK:
            state["python"] = True
        else:
            out[str(what["task"])] = dict(what)
    else:
        build(registry[what], None, 0)
    return out, state["python"], unknown


def _failure_line(failures: Sequence[YamlLoadFailure], shown: int = 3) -> str:
    more = f" (+{len(failures) - shown} more)" if len(failures) > shown else ""
    return "; ".join(f.message for f in failures[:shown]) + more


def _check_planned(name: str, leaves: Mapping[str, dict], python: bool, datasets_map: Mapping[str, Any] | None,
                   src: str | None) -> None:
    """Refusals that need only the configs, before any data are read: a leaf whose
    ``output_type`` is neither multiple_choice nor loglikelihood_rolling (lm-eval's default is
    generate_until), a
    ``--dataset`` key that no task reads."""
    from judgecal.loglik.lmeval_rolling import check_output_types

    check_output_types(name, {n: c.get("output_type", "generate_until") for n, c in leaves.items()}, src)
    if datasets_map and not python:
        _check_dataset_keys(name, datasets_map, {c.get("dataset_path") for c in leaves.values()})


def _check_dataset_keys(name: str, datasets_map: Mapping[str, Any], used: Iterable[Any]) -> None:
    hub = sorted({u for u in used if _hub_id(u)})
    extra = sorted(k for k in datasets_map if k not in hub)
    if extra:
        reads = f"its tasks read {', '.join(hub)}" if hub else "its tasks read no Hub dataset"
        raise UsageError(f"--dataset {', '.join(extra)}: no task of {name!r} reads "
                         f"{'that dataset' if len(extra) == 1 else 'those datasets'}; {reads}")


def _probe_missing(leaves: Mapping[str, dict], data_dir: Any, datasets_map: Any) -> list[tuple[str, str | None]]:
    """The (dataset_path, dataset_name) pairs of ``leaves`` that cannot be loaded offline
    (each distinct pair loaded once through :func:`offline_data`; other errors are not counted)."""
    import datasets

    missing: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    with offline_data(data_dir, datasets_map):
        for cfg in leaves.values():
            path, dname = cfg.get("dataset_path"), cfg.get("dataset_name")
            kwargs = cfg.get("dataset_kwargs") if isinstance(cfg.get("dataset_kwargs"), dict) else {}
            key = json.dumps([path, dname, kwargs], sort_keys=True, default=str)
            if not isinstance(path, str) or key in seen:
                continue
            seen.add(key)
            try:
                datasets.load_dataset(path=path, name=dname, **kwargs)
            except DataNotFoundError:
                missing.append((path, dname))
            except Exception:  # noqa: BLE001 - only what is missing is listed here
                pass
    return missing


def _missing_line(name: str, leaves: Mapping[str, dict], missing: Sequence[tuple[str, str | None]],
                  first: str, shown: int = 8) -> str:
    total = len({(c.get("dataset_path"), c.get("dataset_name")) for c in leaves.values()})
    by_path: dict[str, list[str]] = {}
    for path, dname in missing:
        by_path.setdefault(path, []).append(repr(dname) if dname else "(default)")
    parts = []
    for path, names in by_path.items():
        more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
        parts.append(f"{path!r} config(s) {', '.join(names[:shown])}{more}")
    return (f"lm-eval task {name!r}: {len(missing)} of {total} datasets not found offline: {'; '.join(parts)}; "
            f"the first: {first}")


def split_specs(spec: str | Path | Sequence[str | Path]) -> list[str]:
    """``--task`` as lm-eval's ``--tasks`` takes it: a comma-separated string (or a list of
    such) of task, group and tag names, glob patterns (``mmlu_*``) and task YAML files,
    empty parts dropped, repeats kept once (in their first place). A ``Path`` is one spec."""
    parts = [spec] if isinstance(spec, (str, Path)) else list(spec)
    out: list[str] = []
    for p in parts:
        pieces = [str(p)] if isinstance(p, Path) else str(p).split(",")
        for piece in pieces:
            piece = piece.strip()
            if piece and piece not in out:
                out.append(piece)
    if not out:
        raise UsageError("--task: no task named")
    return out


_GLOB = re.compile(r"[*?\[]")


@dataclasses.dataclass
class _Spec:
    spec: str
    name: str
    what: Any  # what TaskManager.load takes: a name or a config dict
    path: Path | None
    src: str | None
    group_file: bool = False


def _resolve_file(spec: str) -> _Spec:
    path = Path(spec).expanduser()
    if not path.is_file():
        raise InputError("task file does not exist", source=str(path))
    cfg = load_task_file(path)
    group = "group" in cfg and isinstance(cfg.get("task"), list)
    name = str(cfg.get("group") if group else cfg.get("task") or cfg.get("group"))
    return _Spec(spec, name, name if group else cfg, path, str(path), group)


def _resolve_name(tm: Any, spec: str, include_paths: Sequence[Any]) -> list[_Spec]:
    failures = list(getattr(tm, "judgecal_load_failures", []))
    defining = [f for f in failures if spec in f.names]
    if defining:
        other = tm.task_index.get(spec)
        instead = (f"; lm-eval would silently use the definition in {other.yaml_path} instead"
                   if other is not None and other.yaml_path is not None else "")
        raise InputError(f"--task {spec!r}: {defining[0].message} (this YAML in --include-path defines "
                         f"{spec!r} and does not load{instead})")
    names = [spec]
    if spec not in tm.task_index and _GLOB.search(spec):  # lm-eval's --tasks takes glob patterns
        names = tm.match_tasks([spec])
    if not names or spec not in tm.task_index and not _GLOB.search(spec):
        close = difflib.get_close_matches(spec, list(tm.task_index), n=3)
        raise InputError(f"--task {spec!r} is neither a file nor an lm-eval task, group or tag name"
                         + (" (a pattern that matches none)" if _GLOB.search(spec) else "")
                         + (f" (closest: {', '.join(close)})" if close else "")
                         + ("" if include_paths else "; tasks of your own: --include-path DIR")
                         + (f"; {len(failures)} YAML file(s) in --include-path do not load: {_failure_line(failures)}"
                            if failures else ""))
    out = []
    for n in names:
        entry = tm.task_index[n]
        out.append(_Spec(spec, n, n, None, str(entry.yaml_path) if entry.yaml_path is not None else None))
    return out


def load_tasks(spec: str | Path | Sequence[str | Path], *, include_paths: Sequence[str | Path] = (),
               data_dir: str | Path | None = None, datasets_map: Mapping[str, str | Path] | None = None,
               warnings: Counter[str] | None = None,
               seeds: Sequence[int | None] = (DEFAULT_RANDOM_SEED, DEFAULT_FEWSHOT_SEED, DEFAULT_FEWSHOT_SEED),
               metadata: Mapping[str, Any] | None = None) -> LoadedTasks:
    """Build lm-eval's tasks for ``spec``: a task/group/tag name (lm-eval's shipped tasks and
    ``include_paths``), a glob pattern of names (``mmlu_*``), a task/group YAML file
    (:func:`load_task_file`), or several of these (a comma-separated string or a list, as
    lm-eval's ``--tasks``; :func:`split_specs`), built by one ``TaskManager.load`` call as
    lm-eval's ``simple_evaluate`` builds them (one seed setting, lm-eval's refusal of a task
    listed twice through two specs). Data are read offline (:func:`offline_data` with
    ``data_dir``/``datasets_map``). Sets lm-eval's global seeds first
    (:func:`set_lm_eval_seeds` with ``seeds``: python random, numpy, torch; None leaves one
    unset). ``metadata``: lm-eval's ``--metadata`` (:func:`task_manager`). Only
    multiple_choice tasks, or only loglikelihood_rolling (perplexity) tasks, are accepted.

    Before any data are read: ``data_dir`` and every ``datasets_map`` folder must exist; the
    leaf configs (:func:`_leaf_configs`) must all be multiple_choice (or all
    loglikelihood_rolling) and every
    ``datasets_map`` key must be a dataset some task reads; a YAML of an include path that
    does not load is refused when it defines a requested name (or a member a group lists
    that is nowhere else) and otherwise skipped with a note (``LoadedTasks.notes``). When data
    are missing, every missing dataset is listed (not only the first).

    ``LoadedTasks.name`` is the one name, or the names joined by commas; ``kind`` "task",
    "group", "tag", or "list" for several; ``specs`` what each part resolved to.

    Raises UsageError (lm-eval missing, a missing folder, an unused ``--dataset`` key),
    InputError (unknown name, bad YAML, a ``!function`` module that fails to import, a task
    that is not multiple_choice or loglikelihood_rolling, or a mix of the two, anything lm-eval refuses while building, as one line naming
    the file), DataNotFoundError."""
    require()
    raw = split_specs(spec)
    warnings = warnings if warnings is not None else Counter()
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise UsageError(f"--data-dir {data_dir}: not a folder")
    for key, folder in (datasets_map or {}).items():
        if not Path(folder).expanduser().is_dir():
            raise UsageError(f"--dataset {key}={folder}: {folder} is not a folder")
    files = {r: _resolve_file(r) for r in raw if _is_task_file(r) or Path(r).expanduser().is_file()}
    group_dirs = [str(f.path.resolve().parent) for f in files.values() if f.group_file]
    only_task_files = len(files) == len(raw) and not group_dirs
    # a task YAML alone is built from its dict (no index needed); a group YAML by name from its own folder
    tm = task_manager([*include_paths, *dict.fromkeys(group_dirs)], include_defaults=not only_task_files,
                      metadata=metadata)
    specs: list[_Spec] = []
    for r in raw:
        if r not in files:
            specs.extend(_resolve_name(tm, r, include_paths))
            continue
        sp = files[r]
        if sp.group_file:
            entry = tm.task_index.get(sp.name)
            if entry is None or entry.yaml_path is None or entry.yaml_path.resolve() != sp.path.resolve():
                failing = [f for f in getattr(tm, "judgecal_load_failures", [])
                           if f.path.resolve() == sp.path.resolve()]
                raise InputError(failing[0].message if failing else
                                 f"group {sp.name!r} is defined twice in {sp.path.resolve().parent}; "
                                 f"lm-eval's index took {entry.yaml_path if entry else None}", source=sp.src)
        specs.append(sp)
    by_name: dict[str, _Spec] = {}
    for sp in specs:  # a pattern and a name naming the same task: once, as lm-eval dedupes its --tasks
        prev = by_name.get(sp.name)
        if prev is None:
            by_name[sp.name] = sp
        elif (isinstance(sp.what, dict) or isinstance(prev.what, dict)) and sp.path != prev.path:
            raise InputError(f"--task: {prev.spec!r} and {sp.spec!r} both define {sp.name!r} (lm-eval would keep one "
                             "of them without a word); give one")
    specs = list(by_name.values())
    name = ",".join(sp.name for sp in specs)
    failures = list(getattr(tm, "judgecal_load_failures", []))
    warnings.update(getattr(tm, "judgecal_warnings", {}))
    all_leaves: dict[str, dict] = {}
    any_python = False
    for sp in specs:
        try:
            leaves, python, unknown = _leaf_configs(tm, sp.what)
        except JudgecalError:
            raise
        except Exception:  # noqa: BLE001 - lm-eval refuses the same config below, with its own reason
            leaves, python, unknown = {}, True, []
        for ref in unknown:
            hit = [f for f in failures if ref in f.names]
            if hit:
                raise InputError(f"{sp.name!r} lists {ref!r}: {hit[0].message} (this YAML defines {ref!r} and does not "
                                 "load)")
            close = difflib.get_close_matches(ref, list(tm.task_index), n=3)
            raise InputError(f"group {sp.name!r} lists {ref!r}, which is no lm-eval task, group or tag"
                             + (f" (closest: {', '.join(close)})" if close else "")
                             + " (lm-eval would build it as an empty inline task)", source=sp.src)
        try:
            _check_planned(sp.name, leaves, python, None, sp.src)
        except InputError as exc:
            if sp.spec == sp.name or isinstance(sp.what, dict):
                raise
            raise InputError(f"--task {sp.spec!r} (a pattern) matches {sp.name!r}: {exc}") from None
        all_leaves.update(leaves)
        any_python = any_python or python
    src = specs[0].src if len(specs) == 1 else None
    if len(specs) > 1:  # each part is of one kind; together, multiple choice and perplexity do not mix either
        from judgecal.loglik.lmeval_rolling import check_output_types

        check_output_types(name, {n: c.get("output_type", "generate_until") for n, c in all_leaves.items()}, src)
    if datasets_map and not any_python:
        _check_dataset_keys(name, datasets_map, {c.get("dataset_path") for c in all_leaves.values()})
    notes = []
    if failures:
        notes.append(f"{len(failures)} YAML file(s) in the include path(s) do not load and were skipped "
                     f"(lm-eval skips them silently): {_failure_line(failures)}")
    set_lm_eval_seeds(*seeds)
    sources: dict[str, str] = {}
    try:
        with offline_data(data_dir, datasets_map, sources), quiet_lm_eval(warnings):
            loaded = tm.load([sp.what for sp in specs])
    except DataNotFoundError as exc:
        first = str(exc)
        missing = _probe_missing(all_leaves, data_dir, datasets_map) if len(all_leaves) > 1 else []
        if len(missing) > 1:
            raise DataNotFoundError(_missing_line(name, all_leaves, missing, first)) from None
        raise DataNotFoundError(f"lm-eval task {name!r}: {first}") from None
    except JudgecalError:
        raise
    except (Exception, SystemExit) as exc:  # lm-eval's own refusals (bad config values, templates, process_docs)
        hit = function_import_error(exc)
        if hit is not None:
            raise InputError(hit[1], source=hit[0] or src) from None
        if isinstance(exc, ValueError) and str(exc).startswith("Duplicate task") and len(specs) > 1:
            raise InputError(f"--task {name!r}: {exc} (lm-eval scores a task once per run; list it once)") from None
        where = _user_frame(exc)
        at = f" (at {where[0]}:{where[1]})" if where else ""
        raise InputError(f"lm-eval could not build task {name!r}: {_one_line(exc)[:500]}{at}", source=src) from None
    if datasets_map:
        _check_dataset_keys(name, datasets_map, sources)
    if data_dir is not None:
        root = Path(data_dir).expanduser().resolve()
        if not any(Path(v).expanduser().resolve().is_relative_to(root) for v in sources.values()
                   if v != "the datasets cache"):
            read = ", ".join(f"{k} from {v}" for k, v in sources.items()) or "nothing through datasets.load_dataset"
            notes.append(f"--data-dir {data_dir} was not used: no task read a dataset from it (read: {read})")
    if not loaded["tasks"]:
        raise InputError(f"lm-eval task {name!r} has no tasks")
    from judgecal.loglik.lmeval_rolling import check_output_types

    check_output_types(name, {n: t.OUTPUT_TYPE for n, t in loaded["tasks"].items()}, src)

    def kind_of(n: str) -> str:
        if n in loaded["groups"]:
            return "group"
        return "task" if n in loaded["tasks"] else "tag"

    parts = [{"spec": sp.spec, "name": sp.name, "kind": kind_of(sp.name),
              "path": str(sp.path.resolve()) if sp.path is not None else None} for sp in specs]
    if len(specs) == 1:
        kind = "group" if name in loaded["groups"] else "task" if name in loaded["tasks"] and len(loaded["tasks"]) == 1 \
            else "tag"
        path = specs[0].path
    else:
        kind, path = "list", None
    return LoadedTasks(name, kind, loaded, path, config_sha256(loaded), notes, sources, parts)


# ---------------------------------------------------------------- running
def apply_fewshot(lt: LoadedTasks, num_fewshot: int | None, fewshot_seed: int | None) -> dict[str, str]:
    """Set each task's few-shot count and sampler seed exactly as lm-eval's ``simple_evaluate``
    does: ``num_fewshot`` overrides the config's, except where the config fixes 0; without it
    a config without num_fewshot gets 0; ``set_fewshot_seed(fewshot_seed)`` on every task.
    Returns notes (task -> why the request was not applied)."""
    notes: dict[str, str] = {}
    for name, task in lt.tasks.items():
        current = task.get_config("num_fewshot")
        if num_fewshot is not None:
            if current == 0:
                if num_fewshot != 0:
                    notes[name] = "its config fixes num_fewshot: 0 (lm-eval never overrides that)"
            else:
                task.set_config(key="num_fewshot", value=num_fewshot)
        elif current is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=fewshot_seed)
    return notes


def check_fewshot_pool(lt: LoadedTasks, option: str = "--num-fewshot") -> None:
    """After :func:`apply_fewshot`: refuse (one line) a task whose few-shot pool is too small
    for its num_fewshot, before any model is loaded (lm-eval would fail later with Python's
    "Sample larger than population"). The pool is what lm-eval's sampler draws from (the
    ``fewshot_split``, else training, validation or test docs; ``fewshot_config.samples``);
    when it is the evaluation split itself lm-eval draws n + 1 and drops the document being
    scored, so n + 1 are needed (the first_n sampler: n besides that document). Raises
    InputError naming the option, the task, the split and its size."""
    from lm_eval.api.samplers import FirstNSampler

    for name, task in lt.tasks.items():
        n = task.get_config("num_fewshot") or 0
        if n <= 0:
            continue
        sampler = getattr(task, "sampler", None)
        split = getattr(getattr(task, "fewshot_cfg", None), "split", None)
        test_split = getattr(task.config, "test_split", None)
        if sampler is None:
            raise InputError(f"{option} {n}: task {name!r} has no few-shot documents (no fewshot_split, training, "
                             "validation or test split)")
        pool = len(sampler.df) if isinstance(sampler, FirstNSampler) else len(sampler.fewshot_docs())
        same = split is not None and split == test_split
        need = n + 1 if same else n
        if pool < need:
            if split is None and getattr(task.fewshot_cfg, "samples", None) is not None and task.config.fewshot_config:
                where = "fewshot_config samples"
            else:
                split = split or (task.config.training_split if task.has_training_docs() else
                                  task.config.validation_split if task.has_validation_docs() else test_split)
                where = f"few-shot split {split!r}"
            also = " (it is also the evaluation split: the scored document is left out, so n + 1 are needed)" \
                if same else ""
            raise InputError(f"{option} {n}: task {name!r} has only {pool} document(s) in its {where}{also}; "
                             f"at most {pool - 1 if same else pool} shot(s) are possible")


def run_tasks(lt: LoadedTasks, lm: Any, *, limit: int | None = None, apply_chat_template: bool = False,
              fewshot_as_multiturn: bool = False, system_instruction: str | None = None,
              bootstrap_iters: int = DEFAULT_BOOTSTRAP_ITERS, warnings: Counter[str] | None = None) -> dict:
    """``lm_eval.evaluator.evaluate`` on the loaded tasks with ``lm`` (a JudgecalLM or any
    lm-eval LM), samples logged. Call :func:`apply_fewshot` first. Returns lm-eval's results
    dict (``results``, ``groups``, ``samples``, ``n-samples``, ``n-shot``, ``configs``...).
    Raises InputError for anything lm-eval refuses while building requests (one line)."""
    from lm_eval.evaluator import evaluate

    warnings = warnings if warnings is not None else Counter()
    try:
        with quiet_lm_eval(warnings):
            return evaluate(lm=lm, task_dict=lt.task_dict, limit=limit, bootstrap_iters=bootstrap_iters,
                            log_samples=True, system_instruction=system_instruction,
                            apply_chat_template=apply_chat_template, fewshot_as_multiturn=fewshot_as_multiturn)
    except JudgecalError:
        raise
    except NotImplementedError as exc:
        raise InputError(f"lm-eval task {lt.name!r}: {_one_line(exc)}") from None
    except (ValueError, KeyError, TypeError, AssertionError, IndexError) as exc:
        where = _user_frame(exc)
        at = f" (at {where[0]}:{where[1]})" if where else ""
        raise InputError(f"lm-eval could not run task {lt.name!r}: {_one_line(exc)[:500]}{at}") from None
    except Exception as exc:  # a task's own function (doc_to_text, process_results) raising anything else
        where = _user_frame(exc)
        if where is None:
            raise
        raise InputError(f"lm-eval could not run task {lt.name!r}: {_one_line(exc)[:500]} "
                         f"(at {where[0]}:{where[1]})") from None


# ---------------------------------------------------------------- results -> judgecal
def lm_eval_gold(task: Any, doc: dict, choices: Sequence[str]) -> tuple[list[int], str | None]:
    """The gold choice indices of ``doc`` exactly as lm-eval's multiple_choice
    ``process_results`` (``lm_eval/api/task.py``) takes them: the multiple-input form's
    ``doc_to_text``, else ``doc_to_target``; a list is several golds (a hit on any counts); a
    string is looked up among the choices; an index out of range, or a string that is not a
    choice, is -100 (never hit). Returns (golds, why) with ``why`` "several", "not_a_choice",
    "out_of_range" or None."""
    gold = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
    if isinstance(gold, list):
        golds = [g if g < len(choices) else -100 for g in gold]
        return golds, "out_of_range" if -100 in golds else ("several" if len(golds) != 1 else None)
    if isinstance(gold, str):
        return ([list(choices).index(gold)], None) if gold in choices else ([-100], "not_a_choice")
    if isinstance(gold, int) and gold < len(choices):
        return [gold], None
    return [-100], "out_of_range"


def _metric_value(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return f


def _lm_eval_metrics(entry: Mapping[str, Any], n: int) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for key, value in entry.items():
        if "," not in key or "_stderr," in key:
            continue
        metric, filt = key.split(",", 1)
        out[metric] = {"value": _metric_value(value), "stderr": _metric_value(entry.get(f"{metric}_stderr,{filt}")),
                       "n": n, "source": "lm-eval"}
    return out


def to_mc_result(lt: LoadedTasks, results: dict, lm: Any, *, settings: dict[str, Any], model: str,
                 backend: str, warnings: Counter[str], fewshot_notes: Mapping[str, str]):
    """Turn lm-eval's results (with samples) into a :class:`~judgecal.loglik.score.McResult`:
    one item per scored document (tasks in lm-eval's order, documents by doc_id), each choice's
    ll (nats; ``ll_null`` = lm-eval's unconditional ll when the task computes acc_mutual_info),
    tokens, characters and bytes; the top-level metrics are lm-eval's for the task or group
    (``source: lm-eval``) plus judgecal's extras pooled over every item (``source:
    judgecal extra``); diagnostics carry per-task and per-group metrics, notes and lm-eval's
    warnings."""
    from judgecal.loglik import metrics as M
    from judgecal.loglik.lmeval_rolling import ROLLING, rolling_result
    from judgecal.loglik.score import ChoiceResult, ItemResult, McResult

    if lt.tasks and all(t.OUTPUT_TYPE == ROLLING for t in lt.tasks.values()):  # perplexity tasks: no items
        return rolling_result(lt, results, lm, settings=settings, model=model, backend=backend, warnings=warnings,
                              fewshot_notes=fewshot_notes)
    items: list[ItemResult] = []
    hits: dict[str, list[float]] = {m: [] for m in (*JUDGECAL_METRICS, "acc_pmi")}
    why_counts: Counter[str] = Counter()
    choices_all: list[list[str]] = []
    doc_hash = hashlib.sha256()
    req_hash = hashlib.sha256()
    by_task: dict[str, dict] = {}
    filters_seen: set[str] = set()
    n_shot = results.get("n-shot", {})
    for tname, task in lt.tasks.items():
        samples = results["samples"].get(tname, [])
        filters = list(dict.fromkeys(s["filter"] for s in samples))
        filters_seen.update(filters)
        samples = sorted((s for s in samples if not filters or s["filter"] == filters[0]), key=lambda s: s["doc_id"])
        mi = "acc_mutual_info" in getattr(task, "_metric_fn_list", {})
        n_items = len(samples)
        by_task[tname] = {"alias": results["results"].get(tname, {}).get("alias", tname),
                          "num_fewshot": n_shot.get(tname), "n": n_items,
                          "metrics": _lm_eval_metrics(results["results"].get(tname, {}), n_items)}
        doc_hash.update(tname.encode() + b"\0")
        task_hits: dict[str, list[float]] = {}
        for s in samples:
            doc = s["doc"]
            choices = [str(c) for c in task.doc_to_choice(doc)]
            resps = s["filtered_resps"]
            lls = [float(r[0]) for r in resps]
            greedy = [bool(r[1]) for r in resps]
            args = [tuple(a[:2]) for a in s["arguments"]]
            k = len(choices)
            ll_u = lls[k:2 * k] if mi and len(lls) == 2 * k else None
            ntok = [lm.n_tokens.get(a, 0) if hasattr(lm, "n_tokens") else 0 for a in args[:k]]
            golds, why = lm_eval_gold(task, doc, choices)
            if why:
                why_counts[why] += 1
            crs = [ChoiceResult(lls[j], ll_u[j] if ll_u else None, ntok[j], M.n_chars(c), M.n_bytes(c), greedy[j])
                   for j, c in enumerate(choices)]
            score_args = (lls[:k], [c.n_chars for c in crs], [c.n_bytes for c in crs],
                          [max(c.n_tokens, 1) for c in crs], ll_u)
            preds = M.item_predictions(*score_args)
            for m in hits:
                if preds.get(m) is not None:
                    hits[m].append(1.0 if preds[m] in golds else 0.0)
                    task_hits.setdefault(m, []).append(1.0 if preds[m] in golds else 0.0)
            items.append(ItemResult(len(items), golds[0] if len(golds) == 1 else golds[0], crs, preds,
                                    task=tname, doc_id=int(s["doc_id"]), requests=args, golds=golds,
                                    ties=M.item_ties(*score_args)))
            choices_all.append(choices)
            doc_hash.update(str(s["doc_hash"]).encode() + b"\n")
            for a in args:
                req_hash.update(json.dumps(a, ensure_ascii=False).encode() + b"\n")
        extras = {}
        for m, v in task_hits.items():  # judgecal's metrics the task's metric_list lacks, on this task's items
            if m not in by_task[tname]["metrics"] and m in JUDGECAL_METRICS and len(v) == n_items:
                value, se = M.mean_stderr(v)
                extras[m] = {"value": value, "stderr": se, "n": n_items, "source": "judgecal extra"}
        by_task[tname]["extras"] = extras
    if not items:
        raise InputError(f"lm-eval task {lt.name!r}: no documents were scored")
    groups: dict[str, dict] = {}
    for gname in lt.groups:
        entry = results.get("groups", {}).get(gname) or results["results"].get(gname) or {}
        n = sum(by_task[t]["n"] for t in by_task if t in {x.task_name for x in lt.groups[gname].get_all_tasks()})
        groups[gname] = {"alias": entry.get("alias", gname), "n": n, "metrics": _lm_eval_metrics(entry, n)}
    if lt.kind == "group" and groups.get(lt.name, {}).get("metrics"):
        top = dict(groups[lt.name]["metrics"])
    elif len(by_task) == 1:
        top = dict(next(iter(by_task.values()))["metrics"])
    else:
        top = {}
    primary = list(top)
    extras = []
    for m in JUDGECAL_METRICS:
        if m not in top and len(hits[m]) == len(items):
            value, se = M.mean_stderr(hits[m])
            top[m] = {"value": value, "stderr": se, "n": len(items), "source": "judgecal extra"}
            extras.append(m)
    computed = [m for m in M.METRICS if m != "acc_pmi" or len(hits["acc_pmi"]) == len(items)]
    diags = M.diagnostics(choices_all, top, ties=M.count_ties([it.ties for it in items], computed))
    diags["headline"] = primary or [m for m in top if m in extras]
    notes = list(diags["notes"])
    if extras:
        how = "pooled over every item" if len(by_task) > 1 else "on the same log-likelihoods"
        notes.insert(0, f"judgecal extras (not in the task's metric_list): {', '.join(extras)}, {how}")
    if not primary and lt.kind == "list":
        notes.insert(0, f"--task names {len(lt.specs)} tasks/groups ({len(by_task)} tasks): lm-eval reports each task "
                        "and group (by task, groups); the top-level figures are judgecal's, pooled over every item")
    elif not primary:
        what = "a group without aggregate_metric_list" if lt.kind == "group" else "a tag"
        notes.insert(0, f"{lt.name!r} is {what} of {len(by_task)} tasks: lm-eval reports each task (by task), "
                        "the top-level figures are judgecal's, pooled over every item")
    labels = {"several": "have several gold answers (a hit on any counts)",
              "not_a_choice": "have a gold string that is not one of the choices (never a hit, as in lm-eval)",
              "out_of_range": "have a gold index outside the choices (never a hit, as in lm-eval)"}
    for why, count in why_counts.items():
        notes.append(f"{count} item(s) {labels[why]}")
    for tname, why in fewshot_notes.items():
        notes.append(f"--num-fewshot not applied to {tname}: {why}")
    notes.extend(lt.notes)
    if len(filters_seen) > 1:
        notes.append(f"tasks define several filters ({', '.join(sorted(filters_seen))}); items use the first of each task")
    if warnings:
        notes.append(f"lm-eval logged {sum(warnings.values())} warning(s), {len(warnings)} distinct "
                     "(diagnostics.lm_eval_warnings)")
    diags["notes"] = notes
    diags.update(by_task=by_task, groups=groups, lm_eval_warnings=dict(warnings.most_common(20)),
                 item_gold_notes=dict(why_counts))
    gap = None
    if "acc" in top and "acc_norm" in top:
        gap = top["acc_norm"]["value"] - top["acc"]["value"]
    diags["acc_norm_minus_acc"] = gap
    nf = {t: v["num_fewshot"] for t, v in by_task.items()}
    docs_sha, docs_n = documents_sha256(lt)
    settings = {**settings, "num_fewshot": next(iter(nf.values())) if len(set(nf.values())) == 1 else nf,
                "documents_sha256": docs_sha, "documents": docs_n, "data_sources": dict(lt.data_sources),
                "task_config_sha256": lt.config_sha256, "requests_sha256": req_hash.hexdigest(),
                "target_delimiter": _single({t: task.config.target_delimiter for t, task in lt.tasks.items()}),
                "fewshot_delimiter": _single({t: task.config.fewshot_delimiter for t, task in lt.tasks.items()})}
    res = McResult(lt.name, model, backend, settings, items, top, diags)
    res.dataset_sha256 = doc_hash.hexdigest()
    return res


def documents_sha256(lt: LoadedTasks) -> tuple[str, int]:
    """SHA-256 of every evaluation document of every task (tasks in lm-eval's order, each
    name then its documents' hashes as lm-eval computes ``doc_hash``: SHA-256 of the document's
    JSON with indent 2), whatever ``--limit`` scored, and the number of documents. Two runs
    with equal values read the same data, even when they scored different numbers of items."""
    from lm_eval.utils import handle_non_serializable, hash_string

    h = hashlib.sha256()
    n = 0
    for tname, task in lt.tasks.items():
        h.update(tname.encode() + b"\0")
        for doc in task.eval_docs:
            h.update(hash_string(json.dumps(doc, indent=2, default=handle_non_serializable,
                                            ensure_ascii=False)).encode() + b"\n")
            n += 1
    return h.hexdigest(), n


def _single(values: Mapping[str, Any]) -> Any:
    distinct = list(dict.fromkeys(values.values()))
    return distinct[0] if len(distinct) == 1 else dict(values)


def check_limit(limit: int | float | None) -> int | float | None:
    """lm-eval's ``--limit``: an integer >= 1 (the first N documents of each task) or a fraction
    in (0, 1) (the first ceil(fraction x size) documents of each task). Anything else (0, a
    negative number, a non-integer >= 1, NaN) raises UsageError."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, (int, float)):
        raise UsageError(f"--limit must be an integer >= 1 or a fraction in (0, 1), got {limit!r}")
    if isinstance(limit, float) and limit.is_integer() and limit >= 1:
        return int(limit)
    if isinstance(limit, int) and limit >= 1 or isinstance(limit, float) and 0 < limit < 1:
        return limit
    raise UsageError(f"--limit must be an integer >= 1 or a fraction in (0, 1), got {limit!r}")


DEFAULT_SEEDS = (DEFAULT_RANDOM_SEED, DEFAULT_FEWSHOT_SEED, DEFAULT_FEWSHOT_SEED, DEFAULT_FEWSHOT_SEED)


def score_lm_eval(spec: str | Path | Sequence[str | Path], model_folder: str | Path | None = None, *,
                  scorer: Any = None, device: str = "cpu", dtype: str = "float32", batch_size: int | str = "auto",
                  forward: str = "auto", base_url: str | None = None, endpoint_model: str | None = None,
                  limit: int | float | None = None, num_fewshot: int | None = None,
                  fewshot_seed: int | None = DEFAULT_FEWSHOT_SEED, seeds: Sequence[int | None] | None = None,
                  include_paths: Sequence[str | Path] = (), data_dir: str | Path | None = None,
                  datasets_map: Mapping[str, str | Path] | None = None, apply_chat_template: bool = False,
                  fewshot_as_multiturn: bool | None = None, system_instruction: str | None = None,
                  bootstrap_iters: int = DEFAULT_BOOTSTRAP_ITERS, output_path: str | Path | None = None,
                  log_samples: bool = False, write_out: bool = False, metadata: Mapping[str, Any] | None = None,
                  env_info: bool = True, progress: Callable[[int], None] | None = None,
                  max_length: int | None = None):
    """Score lm-eval multiple-choice tasks, groups or tags with judgecal's scorer, or lm-eval
    perplexity tasks (``loglikelihood_rolling``; :mod:`judgecal.loglik.lmeval_rolling`).

    ``spec``: a name, pattern or YAML file, or several (a comma-separated string or a list;
    :func:`load_tasks`). Model: ``model_folder`` (or a loaded ``scorer``; ``device``,
    ``dtype``, ``batch_size``, ``forward`` as in :func:`judgecal.loglik.score.score_task`) or
    ``base_url`` + ``endpoint_model``. ``limit``: the first N documents of each task, or a
    fraction of each (lm-eval's ``--limit``; :func:`check_limit`). ``num_fewshot``,
    ``apply_chat_template``, ``fewshot_as_multiturn`` (None: as lm-eval's CLI, on with a chat
    template), ``system_instruction``: as lm-eval's ``simple_evaluate``. ``seeds``: lm-eval's
    ``--seed`` (python random, numpy, torch, few-shot sampler; None leaves one unset; default
    0, 1234, 1234, 1234); ``fewshot_seed`` overrides the fourth (default 1234). ``metadata``:
    lm-eval's ``--metadata``, given to every task config. ``write_out``: lm-eval's
    ``--write_out`` (the first document's prompt and target of each task), kept in
    ``res.write_out`` (lines) instead of lm-eval's log. ``output_path`` / ``log_samples``:
    lm-eval's results (and samples) files, written by :func:`write_run_files` once the run
    has an id (``res.lm_eval_output`` holds what they need); ``env_info``: lm-eval's
    environment block in that file (``add_env_info``, a few seconds). ``max_length``: the
    model's positions as lm-eval's ``--model_args max_length=`` (rolling windows, truncation;
    default the model's, as HFLM).

    Returns an McResult (``dataset_sha256`` attribute set: SHA-256 of the scored documents).
    Raises UsageError, InputError, DataNotFoundError, ModelError."""
    import time

    from judgecal.loglik import lmeval_output
    from judgecal.loglik.lmeval_lm import JudgecalLM

    limit = check_limit(limit)
    if base_url is not None and max_length is not None:
        raise UsageError("--max-length applies to a local model, not to --base-url (the server sets its context)")
    if num_fewshot is not None and num_fewshot < 0:
        raise UsageError(f"--num-fewshot must be >= 0, got {num_fewshot}")
    if fewshot_as_multiturn is None:
        fewshot_as_multiturn = bool(apply_chat_template)
    elif fewshot_as_multiturn and not apply_chat_template:
        raise UsageError("--fewshot-as-multiturn needs --apply-chat-template (as in lm-eval)")
    if log_samples and output_path is None:
        raise UsageError("--log-samples needs --output-path (as lm-eval's --log_samples needs --output_path)")
    seeds = tuple(DEFAULT_SEEDS if seeds is None else seeds)
    if len(seeds) != 4:
        raise UsageError(f"--seed takes 1 or 4 values (python random, numpy, torch, few-shot), got {len(seeds)}")
    fewshot_seed = seeds[3] if fewshot_seed is None else fewshot_seed
    seeds = (*seeds[:3], fewshot_seed)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise UsageError("--metadata must be a JSON object")
    if output_path is not None:
        lmeval_output.check_output_path(output_path)
    start_date = time.time()
    warnings: Counter[str] = Counter()
    lt = load_tasks(spec, include_paths=include_paths, data_dir=data_dir, datasets_map=datasets_map,
                    warnings=warnings, seeds=seeds[:3], metadata=metadata)
    notes = apply_fewshot(lt, num_fewshot, fewshot_seed)
    check_fewshot_pool(lt, "--num-fewshot" if num_fewshot is not None else "num_fewshot")
    if base_url is not None:
        if not endpoint_model:
            raise UsageError("--base-url needs the served model name (--model NAME)")
        lm = JudgecalLM(base_url=base_url, model=endpoint_model, batch_size=batch_size)
        model_name, backend = endpoint_model, "openai-completions"
        model_args: dict[str, Any] = {"model": endpoint_model, "base_url": base_url, "batch_size": batch_size}
    else:
        if scorer is None and model_folder is None:
            raise UsageError("give a model folder or --base-url")
        lm = JudgecalLM(model_folder, scorer=scorer, batch_size=batch_size, device=device, dtype=dtype, forward=forward,
                        max_length=max_length)
        model_name, backend = (str(model_folder) if model_folder is not None else "(loaded)"), "hf"
        model_args = {"pretrained": str(model_folder) if model_folder is not None else str(
            getattr(lm.tokenizer, "name_or_path", "(loaded)")), "device": device, "dtype": dtype,
            "batch_size": batch_size, "forward": forward}
        if max_length is not None:
            model_args["max_length"] = max_length
    if apply_chat_template and lm.tokenizer is not None and not getattr(lm.tokenizer, "chat_template", None):
        raise UsageError("--apply-chat-template: the model's tokenizer has no chat template")
    tracker = None
    if output_path is not None:
        tracker = lmeval_output.new_tracker(
            output_path, model_args=model_args, system_instruction=system_instruction,
            chat_template=lm.chat_template(apply_chat_template) if apply_chat_template else None,
            fewshot_as_multiturn=fewshot_as_multiturn)
    t0 = time.perf_counter()
    results = run_tasks(lt, lm, limit=limit, apply_chat_template=apply_chat_template,
                        fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction,
                        bootstrap_iters=bootstrap_iters, warnings=warnings)
    wall = time.perf_counter() - t0
    settings = {"device": device if base_url is None else None, "dtype": dtype if base_url is None else None,
                "batch_size": batch_size, "forward": getattr(lm.scorer, "forward_name", None), "limit": limit,
                "null_context": None, "prompt": None, "task_format": "lm-eval", "lm_eval_task": lt.name,
                "lm_eval_kind": lt.kind, "lm_eval_tasks": lt.specs, "lm_eval_version": lm_eval_version(),
                "fewshot_seed": fewshot_seed, "seeds": list(seeds),
                "apply_chat_template": bool(apply_chat_template), "fewshot_as_multiturn": bool(fewshot_as_multiturn),
                "system_instruction": system_instruction, "metadata": dict(metadata) if metadata else None,
                "include_path": [str(p) for p in include_paths] or None,
                "data_dir": str(data_dir) if data_dir is not None else None,
                "datasets": {k: str(v) for k, v in (datasets_map or {}).items()} or None,
                "max_length": lm.max_length}
    if base_url is not None:
        settings["base_url"] = base_url
    res = to_mc_result(lt, results, lm, settings=settings, model=model_name, backend=backend, warnings=warnings,
                       fewshot_notes=notes)
    st = dict(lm.stats)
    st["scoring_seconds"] = st.pop("seconds")
    st["seconds"] = wall
    from judgecal.loglik.lmeval_rolling import n_documents

    st["items_per_s"] = n_documents(res) / wall if wall > 0 else None
    if lm.scorer is not None:
        st.update(n_body_params=lm.scorer.n_body_params, n_head_params=lm.scorer.n_head_params)
    res.stats = st
    res.diagnostics["boundary_fixes"] = st.get("boundary_fixes", 0)
    res.diagnostics["truncated_requests"] = st.get("truncated_requests", 0)
    res.lm_eval_results = results
    res.loaded = lt
    res.write_out = writeout_lines(lt) if write_out else None
    res.lm_eval_output = None
    if tracker is not None:
        full = lmeval_output.complete_results(
            results, lm, model="judgecal", model_args=model_args, batch_size=batch_size,
            device=device if base_url is None else None, use_cache=None, limit=limit,
            bootstrap_iters=bootstrap_iters, start_date=start_date, env_info=env_info,
            seeds={"random_seed": seeds[0], "numpy_seed": seeds[1], "torch_seed": seeds[2], "fewshot_seed": seeds[3]})
        res.lm_eval_output = {"full": full, "tracker": tracker, "log_samples": log_samples}
    if progress is not None:
        progress(n_documents(res))
    return res


def write_run_files(res: Any, run_id: int | None) -> dict[str, Any] | None:
    """Write the lm-eval results (and samples) files of a run scored with ``output_path``
    (:mod:`judgecal.loglik.lmeval_output`), ``run_id`` under the results file's ``judgecal``
    key. Returns the paths written (None when the run has no output path)."""
    from judgecal.loglik import lmeval_output

    out = getattr(res, "lm_eval_output", None)
    if not out:
        return None
    return lmeval_output.write_files(out["full"], out["tracker"], log_samples=out["log_samples"],
                                     extra=lmeval_output.judgecal_block(res, run_id), items=res.items)


def writeout_lines(lt: LoadedTasks) -> list[str]:
    """lm-eval's ``--write_out`` text (``print_writeout``: each task's first document, its
    prompt, target and request), captured from lm-eval's logger as lines."""
    from lm_eval.evaluator_utils import print_writeout

    logger = logging.getLogger("lm_eval.evaluator_utils")
    lines: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = _Keep(logging.INFO)
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        for task in lt.tasks.values():
            print_writeout(task)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    return lines
