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
  taken relative to the YAML file.
- **Offline data.** While tasks load, ``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE`` are on, so
  nothing is downloaded: data come from the datasets library's local formats (json, csv,
  parquet with ``data_files``), a local folder (``dataset_path: /path/to/copy``), the local copy
  of a Hub dataset folder named by ``dataset_path`` under ``data_dir`` (``DATA_DIR/allenai/ai2_arc``)
  or given in ``datasets_map`` (``{"allenai/ai2_arc": "/path"}``), or the datasets cache (a local
  folder is cached under a key of its files, :func:`local_cache_dir`). When
  the data cannot be found, one line names the dataset, the config and where it looked
  (:class:`DataNotFoundError`).
- **Checks.** Only ``output_type: multiple_choice`` tasks are scored (others are refused by
  name). Items whose gold lm-eval scores but judgecal's own formats would refuse (several gold
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
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from judgecal.errors import InputError, JudgecalError, UsageError

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


def _load_yaml(path: Path, *, recursive: bool) -> dict:
    """lm-eval's ``load_yaml`` (``!function`` resolved beside the file) with one-line errors."""
    import yaml
    from lm_eval.tasks._yaml_loader import load_yaml

    src = str(path)
    try:
        cfg = load_yaml(path, resolve_func=True, recursive=recursive)
    except OSError as exc:
        raise InputError(f"cannot read task file: {exc.strerror or exc}", source=src) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", source=src,
                         line=mark.line + 1 if mark else None) from None
    except (ImportError, AttributeError) as exc:  # a !function that cannot be imported
        raise InputError(f"!function: {_one_line(exc)}", source=src) from None
    except ValueError as exc:  # not a mapping, include cycle, bad !function reference
        raise InputError(_one_line(exc), source=src) from None
    return cfg


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
    cfg = _load_yaml(path, recursive=False)
    includes = cfg.pop("include", None)
    if includes is not None:
        merged: dict = {}
        for inc in includes if isinstance(includes, list) else [includes]:
            inc_cfg = _load_yaml(_find_include(inc, path.parent, src), recursive=True)
            inc_cfg.pop("task_list", None)  # lm-eval: task_list defines tasks of the included file only
            merged.update(inc_cfg)
        merged.update(cfg)
        cfg = merged
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


@functools.lru_cache(maxsize=8)
def _task_manager(include_paths: tuple[str, ...], include_defaults: bool):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(include_paths) or None, include_defaults=include_defaults)


def task_manager(include_paths: Sequence[str | Path] = (), *, include_defaults: bool = True):
    """An lm-eval ``TaskManager`` over the shipped tasks (``include_defaults``) and
    ``include_paths``, built once per process for the same arguments (indexing the shipped
    tasks takes seconds). Raises InputError for an include path that is not a folder."""
    paths = []
    for p in include_paths:
        q = Path(p).expanduser()
        if not q.is_dir():
            raise InputError("--include-path is not a folder", source=str(q))
        paths.append(str(q.resolve()))
    return _task_manager(tuple(paths), include_defaults)


# ---------------------------------------------------------------- offline data
def _hub_id(path: Any) -> bool:
    """A ``dataset_path`` that names a Hub dataset (``owner/name`` or ``name``), not a local path
    or a datasets builder (json, csv, parquet, ...)."""
    if not isinstance(path, str) or not path or path.startswith((".", "/", "~")) or os.path.exists(path):
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
def offline_data(data_dir: str | Path | None = None, datasets_map: Mapping[str, str | Path] | None = None) -> Iterator[None]:
    """While active: Hub and datasets offline (nothing is downloaded), ``datasets.load_dataset``
    reads a Hub dataset ``owner/name`` from ``datasets_map[owner/name]`` or
    ``data_dir/owner/name`` where that folder exists (else from the datasets cache; a local
    folder is cached under :func:`local_cache_dir`), and a
    dataset that cannot be loaded raises :class:`DataNotFoundError` naming the dataset, its
    config and where it looked. lm-eval's logging and progress bars are silenced (its warnings
    are collected by :func:`quiet_lm_eval`)."""
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
            return original(use, name, *args, **kwargs)
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
    """What ``TaskManager.load`` built for one spec: ``name`` (the task, group or tag),
    ``kind`` ("task", "group", "tag"), ``task_dict`` (lm-eval's ``{"tasks", "groups",
    "group_map"}``), ``path`` (the YAML file, or None for a name), ``config_sha256`` (resolved
    configs before run-time settings; see :func:`config_sha256`)."""

    name: str
    kind: str
    task_dict: dict
    path: Path | None
    config_sha256: str

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


def set_lm_eval_seeds(random_seed: int = DEFAULT_RANDOM_SEED, numpy_seed: int = DEFAULT_FEWSHOT_SEED,
                      torch_seed: int | None = DEFAULT_FEWSHOT_SEED) -> None:
    """The global seeds lm-eval's ``simple_evaluate`` sets before it loads tasks (python
    ``random`` 0, numpy 1234, torch 1234): ``process_docs`` functions that shuffle see the same
    state as under lm-eval."""
    import numpy as np

    random.seed(random_seed)
    np.random.seed(numpy_seed)
    if torch_seed is not None:
        try:
            import torch
        except ImportError:
            return
        torch.manual_seed(torch_seed)


def config_sha256(task_dict: dict) -> str:
    """SHA-256 of the resolved configs of every task (lm-eval's ``dump_config``: functions by
    their source) and group, before run-time settings (num_fewshot) are applied, leaving out
    where the data are read from (``dataset_path``, ``dataset_kwargs``, the config file's own
    path): the data themselves are hashed apart (``dataset_sha256``)."""
    def clean(cfg: dict) -> dict:
        cfg = {k: v for k, v in cfg.items() if k not in ("dataset_path", "dataset_kwargs")}
        if isinstance(cfg.get("metadata"), dict):
            cfg["metadata"] = {k: v for k, v in cfg["metadata"].items() if k != "config_source"}
        return cfg

    body = {"tasks": {n: clean(t.dump_config()) for n, t in sorted(task_dict["tasks"].items())},
            "groups": {n: clean(g.to_dict() or {}) for n, g in sorted((task_dict.get("groups") or {}).items())}}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def load_tasks(spec: str | Path, *, include_paths: Sequence[str | Path] = (), data_dir: str | Path | None = None,
               datasets_map: Mapping[str, str | Path] | None = None,
               warnings: Counter[str] | None = None) -> LoadedTasks:
    """Build lm-eval's tasks for ``spec``: a task/group/tag name (lm-eval's shipped tasks and
    ``include_paths``) or a task/group YAML file (:func:`load_task_file`). Data are read
    offline (:func:`offline_data` with ``data_dir``/``datasets_map``). Sets lm-eval's global
    seeds first (:func:`set_lm_eval_seeds`). Only multiple_choice tasks are accepted.

    Raises UsageError (lm-eval missing), InputError (unknown name, bad YAML, a task that is not
    multiple_choice, anything lm-eval refuses while building, as one line),
    DataNotFoundError."""
    require()
    spec = str(spec)
    warnings = warnings if warnings is not None else Counter()
    path: Path | None = None
    if _is_task_file(spec) or Path(spec).expanduser().is_file():
        path = Path(spec).expanduser()
        if not path.is_file():
            raise InputError("task file does not exist", source=str(path))
        cfg = load_task_file(path)
        group = "group" in cfg and isinstance(cfg.get("task"), list)
        tm = task_manager([*include_paths, path.resolve().parent] if group else include_paths, include_defaults=group)
        name = str(cfg.get("group") if group else cfg.get("task") or cfg.get("group"))
        what: Any = cfg
    else:
        tm = task_manager(include_paths)
        if spec not in tm.task_index:
            close = difflib.get_close_matches(spec, tm.all_tasks, n=3)
            raise InputError(f"--task {spec!r} is neither a file nor an lm-eval task, group or tag name"
                             + (f" (closest: {', '.join(close)})" if close else "")
                             + ("" if include_paths else "; tasks of your own: --include-path DIR"))
        name = spec
        what = spec
    set_lm_eval_seeds()
    try:
        with offline_data(data_dir, datasets_map), quiet_lm_eval(warnings):
            loaded = tm.load([what])
    except DataNotFoundError as exc:
        raise DataNotFoundError(f"lm-eval task {name!r}: {exc}") from None
    except JudgecalError:
        raise
    except Exception as exc:  # lm-eval's own refusals (bad config values, templates, process_docs)
        raise InputError(f"lm-eval could not build task {name!r}: {_one_line(exc)[:500]}",
                         source=str(path) if path else None) from None
    if not loaded["tasks"]:
        raise InputError(f"lm-eval task {name!r} has no tasks")
    bad = {n: t.OUTPUT_TYPE for n, t in loaded["tasks"].items() if t.OUTPUT_TYPE != "multiple_choice"}
    if bad:
        shown = ", ".join(f"{n} ({o})" for n, o in list(bad.items())[:5])
        raise InputError(f"judgecal mc scores output_type multiple_choice only; {len(bad)} task(s) of {name!r} are not: "
                         f"{shown}", source=str(path) if path else None)
    kind = "group" if name in loaded["groups"] else "task" if name in loaded["tasks"] and len(loaded["tasks"]) == 1 \
        else "tag"
    return LoadedTasks(name, kind, loaded, path, config_sha256(loaded))


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
        raise InputError(f"lm-eval could not run task {lt.name!r}: {_one_line(exc)[:500]}") from None


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
    from judgecal.loglik.score import ChoiceResult, ItemResult, McResult

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
            preds = M.item_predictions(lls[:k], [c.n_chars for c in crs], [c.n_bytes for c in crs],
                                       [max(c.n_tokens, 1) for c in crs], ll_u)
            for m in hits:
                if preds.get(m) is not None:
                    hits[m].append(1.0 if preds[m] in golds else 0.0)
            items.append(ItemResult(len(items), golds[0] if len(golds) == 1 else golds[0], crs, preds,
                                    task=tname, doc_id=int(s["doc_id"]), requests=args, golds=golds))
            choices_all.append(choices)
            doc_hash.update(str(s["doc_hash"]).encode() + b"\n")
            for a in args:
                req_hash.update(json.dumps(a, ensure_ascii=False).encode() + b"\n")
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
    diags = M.diagnostics(choices_all, top)
    diags["headline"] = primary or [m for m in top if m in extras]
    notes = list(diags["notes"])
    if extras:
        how = "pooled over every item" if len(by_task) > 1 else "on the same log-likelihoods"
        notes.insert(0, f"judgecal extras (not in the task's metric_list): {', '.join(extras)}, {how}")
    if not primary:
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
    settings = {**settings, "num_fewshot": next(iter(nf.values())) if len(set(nf.values())) == 1 else nf,
                "task_config_sha256": lt.config_sha256, "requests_sha256": req_hash.hexdigest(),
                "target_delimiter": _single({t: task.config.target_delimiter for t, task in lt.tasks.items()}),
                "fewshot_delimiter": _single({t: task.config.fewshot_delimiter for t, task in lt.tasks.items()})}
    res = McResult(lt.name, model, backend, settings, items, top, diags)
    res.dataset_sha256 = doc_hash.hexdigest()
    return res


def _single(values: Mapping[str, Any]) -> Any:
    distinct = list(dict.fromkeys(values.values()))
    return distinct[0] if len(distinct) == 1 else dict(values)


def score_lm_eval(spec: str | Path, model_folder: str | Path | None = None, *, scorer: Any = None,
                  device: str = "cpu", dtype: str = "float32", batch_size: int | str = "auto", forward: str = "auto",
                  base_url: str | None = None, endpoint_model: str | None = None, limit: int | None = None,
                  num_fewshot: int | None = None, fewshot_seed: int = DEFAULT_FEWSHOT_SEED,
                  include_paths: Sequence[str | Path] = (), data_dir: str | Path | None = None,
                  datasets_map: Mapping[str, str | Path] | None = None, apply_chat_template: bool = False,
                  fewshot_as_multiturn: bool | None = None, system_instruction: str | None = None,
                  bootstrap_iters: int = DEFAULT_BOOTSTRAP_ITERS,
                  progress: Callable[[int], None] | None = None):
    """Score an lm-eval multiple-choice task, group or tag with judgecal's scorer.

    ``spec``: a name or YAML file (:func:`load_tasks`). Model: ``model_folder`` (or a loaded
    ``scorer``; ``device``, ``dtype``, ``batch_size``, ``forward`` as in
    :func:`judgecal.loglik.score.score_task`) or ``base_url`` + ``endpoint_model``.
    ``limit``: first N documents of each task (lm-eval's ``--limit``). ``num_fewshot`` /
    ``fewshot_seed`` (default 1234), ``apply_chat_template``, ``fewshot_as_multiturn`` (None:
    as lm-eval's CLI, on with a chat template), ``system_instruction``: as lm-eval's
    ``simple_evaluate``. Returns an McResult (``dataset_sha256`` attribute set: SHA-256 of the
    scored documents). Raises UsageError, InputError, DataNotFoundError, ModelError."""
    import time

    from judgecal.loglik.lmeval_lm import JudgecalLM

    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be >= 1, got {limit}")
    if num_fewshot is not None and num_fewshot < 0:
        raise UsageError(f"--num-fewshot must be >= 0, got {num_fewshot}")
    if fewshot_as_multiturn is None:
        fewshot_as_multiturn = bool(apply_chat_template)
    elif fewshot_as_multiturn and not apply_chat_template:
        raise UsageError("--fewshot-as-multiturn needs --apply-chat-template (as in lm-eval)")
    warnings: Counter[str] = Counter()
    lt = load_tasks(spec, include_paths=include_paths, data_dir=data_dir, datasets_map=datasets_map,
                    warnings=warnings)
    if base_url is not None:
        if not endpoint_model:
            raise UsageError("--base-url needs the served model name (--model NAME)")
        lm = JudgecalLM(base_url=base_url, model=endpoint_model, batch_size=batch_size)
        model_name, backend = endpoint_model, "openai-completions"
    else:
        if scorer is None and model_folder is None:
            raise UsageError("give a model folder or --base-url")
        lm = JudgecalLM(model_folder, scorer=scorer, batch_size=batch_size, device=device, dtype=dtype, forward=forward)
        model_name, backend = (str(model_folder) if model_folder is not None else "(loaded)"), "hf"
    if apply_chat_template and lm.tokenizer is not None and not getattr(lm.tokenizer, "chat_template", None):
        raise UsageError("--apply-chat-template: the model's tokenizer has no chat template")
    notes = apply_fewshot(lt, num_fewshot, fewshot_seed)
    t0 = time.perf_counter()
    results = run_tasks(lt, lm, limit=limit, apply_chat_template=apply_chat_template,
                        fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction,
                        bootstrap_iters=bootstrap_iters, warnings=warnings)
    wall = time.perf_counter() - t0
    settings = {"device": device if base_url is None else None, "dtype": dtype if base_url is None else None,
                "batch_size": batch_size, "forward": getattr(lm.scorer, "forward_name", None), "limit": limit,
                "null_context": None, "prompt": None, "task_format": "lm-eval", "lm_eval_task": lt.name,
                "lm_eval_kind": lt.kind, "lm_eval_version": lm_eval_version(), "fewshot_seed": fewshot_seed,
                "apply_chat_template": bool(apply_chat_template), "fewshot_as_multiturn": bool(fewshot_as_multiturn),
                "system_instruction": system_instruction,
                "include_path": [str(p) for p in include_paths] or None,
                "data_dir": str(data_dir) if data_dir is not None else None,
                "datasets": {k: str(v) for k, v in (datasets_map or {}).items()} or None}
    if base_url is not None:
        settings["base_url"] = base_url
    res = to_mc_result(lt, results, lm, settings=settings, model=model_name, backend=backend, warnings=warnings,
                       fewshot_notes=notes)
    st = dict(lm.stats)
    st["scoring_seconds"] = st.pop("seconds")
    st["seconds"] = wall
    st["items_per_s"] = len(res.items) / wall if wall > 0 else None
    if lm.scorer is not None:
        st.update(n_body_params=lm.scorer.n_body_params, n_head_params=lm.scorer.n_head_params)
    res.stats = st
    res.diagnostics["boundary_fixes"] = st.get("boundary_fixes", 0)
    res.lm_eval_results = results
    res.loaded = lt
    if progress is not None:
        progress(len(res.items))
    return res
