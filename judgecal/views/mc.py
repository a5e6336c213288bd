"""``judgecal mc``: score a multiple-choice task with a local model or a completions endpoint,
store the run (``mc_run`` + one ``mc_item_result`` per item), list, load and compare runs.

Wiring only: task loading, scoring and metrics live in :mod:`judgecal.loglik`; the tables in
:mod:`judgecal.db.models`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from sqlalchemy import select

from judgecal.db.models import iso_utc
from judgecal.db import models as m
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import InputError, NotFoundError, UsageError
from judgecal.loglik import metrics as M
from judgecal.loglik.score import DEFAULT_NULL_CONTEXT, McResult, score_task
from judgecal.loglik.tasks import DEFAULT_PROMPT, load_task


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes. For a YAML task the stored dataset hash is
    sha256(hex(yaml) + hex(data file)), so a changed data file is a new dataset."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise InputError(f"cannot read task file: {exc.strerror}", source=str(path)) from exc
    return h.hexdigest()


LM_EVAL_OPTIONS = ("num_fewshot", "fewshot_seed", "include_paths", "data_dir", "datasets_map", "apply_chat_template",
                   "fewshot_as_multiturn", "system_instruction", "output_path", "log_samples", "write_out", "seeds",
                   "metadata", "max_length")
NATIVE_OPTIONS = ("prompt", "null_context")
OPTION_NAMES = {"num_fewshot": "--num-fewshot", "fewshot_seed": "--fewshot-seed", "include_paths": "--include-path",
                "data_dir": "--data-dir", "datasets_map": "--dataset", "apply_chat_template": "--apply-chat-template",
                "fewshot_as_multiturn": "--fewshot-as-multiturn", "system_instruction": "--system-instruction",
                "output_path": "--output-path", "log_samples": "--log-samples", "write_out": "--write-out",
                "seeds": "--seed", "metadata": "--metadata", "max_length": "--max-length",
                "prompt": "--prompt", "null_context": "--null-context/--no-pmi"}
_NATIVE_SUFFIXES = (".jsonl", ".json", ".txt", ".bz2", ".gz", ".yaml", ".yml")


def task_kind(task: str | Path, loader: str = "auto") -> str:
    """How ``task`` is read: "lm-eval" (an lm-evaluation-harness task/group/tag name, or a YAML
    config while lm-eval is installed) or "native" (judgecal's JSONL, HellaSwag text and
    simple-YAML loaders, :func:`judgecal.loglik.tasks.load_task`). ``loader``: "auto",
    "lm-eval" or "native" forces one. Raises InputError for a missing file, UsageError when
    lm-eval is needed but absent or the loader does not fit the task."""
    from judgecal.loglik import lmeval_tasks

    if loader not in ("auto", "lm-eval", "native"):
        raise UsageError(f"--loader must be auto, lm-eval or native, got {loader!r}")
    spec = str(task)
    if "," in spec and not Path(spec).expanduser().is_file():  # several tasks, as lm-eval's --tasks
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        if loader == "native":
            raise UsageError(f"--loader native reads one judgecal task file; --task {spec!r} names several "
                             "(several tasks in one call are lm-eval tasks)")
        for part in parts:
            if task_kind(part, loader) != "lm-eval":
                raise UsageError(f"--task {spec!r}: {part} is a judgecal task file; several tasks in one call are "
                                 "lm-eval tasks (names, patterns, YAML configs): score a judgecal file on its own")
        return "lm-eval"
    p = Path(spec).expanduser()
    is_yaml = spec.lower().endswith((".yaml", ".yml"))
    if p.is_file():
        if not is_yaml:
            if loader == "lm-eval":
                raise UsageError(f"--loader lm-eval: {spec} is not an lm-eval YAML task config")
            return "native"
        if loader == "native":
            return "native"
        if loader == "lm-eval":
            lmeval_tasks.require()
            return "lm-eval"
        return "lm-eval" if lmeval_tasks.available() else "native"
    looks_like_file = spec.lower().endswith(_NATIVE_SUFFIXES) or os.sep in spec
    if loader == "native" and not looks_like_file:
        raise UsageError(f"--loader native reads judgecal task files (JSONL, HellaSwag text, simple YAML) and "
                         f"{spec!r} is not a file; an lm-eval task name needs --loader auto or lm-eval")
    if loader == "native" or looks_like_file:
        raise InputError("task file does not exist", source=spec)
    if not lmeval_tasks.available():
        raise UsageError(f"--task {spec!r} is not a file; lm-eval task names need lm-evaluation-harness: "
                         f"{lmeval_tasks.LM_EVAL_HINT}")
    return "lm-eval"


def _fewshot_seed(fewshot_seed: int | None, seeds: Sequence[int | None] | None) -> int | None:
    """The few-shot sampler's seed: ``--fewshot-seed``, else ``--seed``'s fourth value, else
    1234 (lm-eval's). Both given and different: UsageError."""
    from judgecal.loglik.lmeval_tasks import DEFAULT_FEWSHOT_SEED

    if seeds is not None and len(seeds) == 4 and fewshot_seed is not None and seeds[3] != fewshot_seed:
        raise UsageError(f"--fewshot-seed {fewshot_seed} and --seed's few-shot value {seeds[3]} differ: give one")
    if fewshot_seed is not None:
        return fewshot_seed
    if seeds is not None and len(seeds) == 4:
        return seeds[3]
    return DEFAULT_FEWSHOT_SEED


def _native_limit(limit: int | float | None, n: int) -> int | None:
    """``--limit`` for a judgecal task file of ``n`` items: an integer >= 1 as it is, a fraction
    in (0, 1) as ceil(fraction x n) items (lm-eval's rule)."""
    import math

    from judgecal.loglik.lmeval_tasks import check_limit

    limit = check_limit(limit)
    if isinstance(limit, float):
        return max(1, int(math.ceil(n * limit)))
    return limit


def _verb(options: Sequence[str]) -> str:
    return "applies" if len(options) == 1 else "apply"


def score(task_path: str | Path, model: str, *, device: str = "cpu", dtype: str = "float32",
          batch_size: int | str = "auto", forward: str = "auto",
          null_context: str | None = DEFAULT_NULL_CONTEXT, limit: int | float | None = None,
          prompt: str = DEFAULT_PROMPT,
          base_url: str | None = None, db_url: str | None = None, store: bool = True,
          progress: Callable[[int], None] | None = None, loader: str = "auto",
          num_fewshot: int | None = None, fewshot_seed: int | None = None, include_paths: Sequence[str | Path] = (),
          data_dir: str | Path | None = None, datasets_map: Mapping[str, str | Path] | None = None,
          apply_chat_template: bool = False, fewshot_as_multiturn: bool | None = None,
          system_instruction: str | None = None, output_path: str | Path | None = None, log_samples: bool = False,
          write_out: bool = False, seeds: Sequence[int | None] | None = None,
          metadata: Mapping[str, Any] | None = None, env_info: bool = True,
          given: Iterable[str] = (), max_length: int | None = None) -> tuple[int | None, McResult]:
    """Load ``task_path``, score it and store the run. ``task_path``: a judgecal task file
    (JSONL, HellaSwag text, simple lm-eval YAML) or an lm-eval task/group/tag name or YAML
    config (:func:`task_kind`; lm-eval tasks through :func:`judgecal.loglik.lmeval_tasks.score_lm_eval`
    with ``num_fewshot``, ``fewshot_seed``, ``include_paths``, ``data_dir``, ``datasets_map``,
    ``apply_chat_template``, ``fewshot_as_multiturn``, ``system_instruction``, ``seeds``,
    ``metadata``, ``write_out``, ``max_length`` (lm-eval's ``max_length`` model argument: the
    positions of the rolling windows of perplexity tasks and of truncation), and ``output_path`` / ``log_samples``: lm-eval's results and
    samples files, written once the run is stored, the paths in ``result.output_files``).
    Several lm-eval tasks in one call: a comma-separated ``task_path``. ``limit``: an integer
    >= 1 or a fraction in (0, 1) (of each task). ``model``:
    "smollm2", a model folder, or (with ``base_url``) the served model name. ``given``: the
    option names the user set explicitly (from :data:`LM_EVAL_OPTIONS` and
    :data:`NATIVE_OPTIONS`): an option that does not apply to the task's kind is refused rather
    than ignored. Returns ``(run_id or None, McResult)``. Raises InputError, ModelError,
    EndpointError, UsageError, DatabaseError."""
    kind = task_kind(task_path, loader)
    given = set(given)
    if kind == "native":
        wrong = [OPTION_NAMES[o] for o in LM_EVAL_OPTIONS if o in given]
        if wrong:
            raise UsageError(f"{', '.join(wrong)} {_verb(wrong)} to lm-eval tasks (a task name or YAML config), "
                             f"not to the judgecal task file {task_path}")
    else:
        wrong = [OPTION_NAMES[o] for o in NATIVE_OPTIONS if o in given]
        if wrong:
            raise UsageError(f"{', '.join(wrong)} {_verb(wrong)} to judgecal task files only: an lm-eval task builds its own "
                             "prompts, and computes PMI (acc_mutual_info, against lm-eval's unconditional context) "
                             "when its metric_list names it")
    folder = None
    if base_url is None:
        from judgecal.localmodel import resolve_model

        folder = resolve_model(model)
    if kind == "lm-eval":
        from judgecal.loglik.lmeval_tasks import DEFAULT_FEWSHOT_SEED, score_lm_eval

        result = score_lm_eval(task_path, folder, device=device, dtype=dtype, batch_size=batch_size,
                               forward=forward, base_url=base_url, endpoint_model=model if base_url else None,
                               limit=limit, num_fewshot=num_fewshot,
                               fewshot_seed=_fewshot_seed(fewshot_seed, seeds),
                               include_paths=include_paths, data_dir=data_dir, datasets_map=datasets_map,
                               apply_chat_template=apply_chat_template, fewshot_as_multiturn=fewshot_as_multiturn,
                               system_instruction=system_instruction, seeds=seeds, metadata=metadata,
                               write_out=write_out, output_path=output_path, log_samples=log_samples,
                               env_info=env_info, progress=progress, max_length=max_length)
        if base_url is None:
            result.model = model if model == "smollm2" else str(folder)
        sha = result.dataset_sha256
        loaded = result.loaded
        stored_path = str(loaded.path.resolve()) if loaded.path is not None else None
    else:
        task = load_task(task_path, prompt=prompt)
        limit = _native_limit(limit, len(task.items))
        if base_url is None:
            result = score_task(task, folder, device=device, dtype=dtype, batch_size=batch_size, forward=forward,
                                null_context=null_context, limit=limit, progress=progress)
            result.model = model if model == "smollm2" else str(folder)
        else:
            result = score_task(task, None, batch_size=batch_size, null_context=null_context, limit=limit,
                                base_url=base_url, endpoint_model=model)
        result.settings["prompt"] = prompt if task.format == "jsonl" else None
        sha = None
        stored_path = str(Path(task_path).resolve())
    if not store:
        _write_files(result, None)
        return None, result
    if sha is None:
        sha = file_sha256(task_path)
        if task.data_path is not None:  # a YAML task: hash the YAML and the data file it reads
            sha = hashlib.sha256((sha + file_sha256(task.data_path)).encode()).hexdigest()
    from judgecal.loglik.lmeval_rolling import n_documents  # items, or a perplexity run's documents

    engine = get_engine(db_url)
    try:
        with session_scope(engine) as s:
            run = m.McRun(model=result.model, task=result.task, task_path=stored_path,
                          dataset_sha256=sha, backend=result.backend, n_items=n_documents(result),
                          # a --base-url is stored without credentials, query string or fragment
                          settings=_without_secrets(result.settings), metrics=result.metrics,
                          diagnostics={**result.diagnostics, "stats": result.stats})
            s.add(run)
            s.flush()
            s.add_all([
                m.McItemResult(run_id=run.id, item_index=it.index, gold=it.gold, choices=_choice_rows(it),
                               pred_acc=it.predictions["acc"], pred_acc_norm=it.predictions["acc_norm"],
                               pred_acc_bytes=it.predictions["acc_bytes"],
                               pred_acc_per_token=it.predictions["acc_per_token"],
                               pred_acc_pmi=it.predictions["acc_pmi"], task=it.task, doc_id=it.doc_id,
                               golds=list(it.golds) if it.golds is not None and len(it.golds) > 1 else None)
                for it in result.items
            ])
            run_id = run.id
    finally:
        engine.dispose()
    _write_files(result, run_id)
    return run_id, result


def _choice_rows(it: Any) -> list[dict]:
    """The stored ``choices`` of an item: each ChoiceResult, plus for lm-eval items the request
    scored (``request``: [context, continuation]) and acc_mutual_info's unconditional one
    (``null_request``)."""
    rows = [asdict(c) for c in it.choices]
    reqs = it.requests or []
    k = len(rows)
    for j, row in enumerate(rows):
        if j < len(reqs):
            row["request"] = list(reqs[j])
        if len(reqs) == 2 * k:
            row["null_request"] = list(reqs[k + j])
    return rows


def _write_files(result: McResult, run_id: int | None) -> None:
    if getattr(result, "lm_eval_output", None):
        from judgecal.loglik.lmeval_tasks import write_run_files

        result.output_files = write_run_files(result, run_id)


def _without_secrets(settings: dict) -> dict:
    """``settings`` with its ``base_url`` (an endpoint's URL) as
    :func:`judgecal.secrets.endpoint_without_secrets` gives it: what ``mc_run.settings`` stores."""
    if not settings or not settings.get("base_url"):
        return settings
    from judgecal.secrets import endpoint_without_secrets

    return {**settings, "base_url": endpoint_without_secrets(str(settings["base_url"]))}


def _run_dict(run: m.McRun) -> dict[str, Any]:
    return {"id": run.id, "model": run.model, "task": run.task, "task_path": run.task_path,
            "dataset_sha256": run.dataset_sha256, "backend": run.backend, "n_items": run.n_items,
            "settings": run.settings, "metrics": run.metrics, "diagnostics": run.diagnostics,
            "created_at": iso_utc(run.created_at)}


def list_runs(db_url: str | None = None, *, model: str | None = None) -> list[dict]:
    """Every stored run (newest first), optionally of one model, as dicts (no item rows), each
    with ``setup`` (shots, chat template, few-shot seed, limit:
    :func:`judgecal.report.mc_tables.run_setup`)."""
    engine = get_engine(db_url)
    try:
        with session_scope(engine) as s:
            q = select(m.McRun).order_by(m.McRun.id.desc())
            if model:
                q = q.where(m.McRun.model == model)
            from judgecal.report.mc_tables import run_setup

            return [{**_run_dict(r), "setup": run_setup(r.settings or {})} for r in s.scalars(q)]
    finally:
        engine.dispose()


def load_run(run_id: int, db_url: str | None = None, *, items: bool = True) -> dict:
    """One run as a dict, with ``items`` (per-item rows) when asked. Raises NotFoundError."""
    engine = get_engine(db_url)
    try:
        with session_scope(engine) as s:
            run = s.get(m.McRun, run_id)
            if run is None:
                raise NotFoundError(f"no multiple-choice run with id {run_id} (see `judgecal mc list`)")
            out = _run_dict(run)
            if items:
                rows = s.scalars(select(m.McItemResult).where(m.McItemResult.run_id == run_id)
                                 .order_by(m.McItemResult.item_index))
                out["items"] = [{"item_index": r.item_index, "task": r.task, "doc_id": r.doc_id, "gold": r.gold,
                                 "golds": r.golds, "choices": r.choices,
                                 "pred_acc": r.pred_acc, "pred_acc_norm": r.pred_acc_norm,
                                 "pred_acc_bytes": r.pred_acc_bytes, "pred_acc_per_token": r.pred_acc_per_token,
                                 "pred_acc_pmi": r.pred_acc_pmi} for r in rows]
            return out
    finally:
        engine.dispose()


# settings that change what is scored (not how fast): a comparison across them is flagged
COMPARED_SETTINGS = ("prompt", "null_context", "target_delimiter", "task_format", "dtype", "num_fewshot", "fewshot_seed",
                     "task_config_sha256", "requests_sha256", "lm_eval_version", "apply_chat_template",
                     "fewshot_as_multiturn", "system_instruction", "seeds", "metadata", "max_length")
# settings recorded since issue 24 (max_length: issue 36): compared only when both runs have them (older runs lack the key)
_NEWER_SETTINGS = ("seeds", "metadata", "max_length")


def _item_sets(a: Mapping[str, Any], b: Mapping[str, Any], same_dataset: bool) -> str | None:
    """None when runs ``a`` and ``b`` (stored-run dicts) scored the same items, else one clause
    saying how their items differ: the same data with another number of items (``--limit``),
    other data, or (runs stored before ``documents_sha256`` existed) other items, the data
    unknown. The stored ``dataset_sha256`` is, for a judgecal task file, the SHA-256 of the
    file (a ``--limit`` does not change it), and for an lm-eval task that of the scored
    documents (it changes with ``--limit``); ``settings.documents_sha256`` (lm-eval tasks) is
    that of every evaluation document, whatever the limit."""
    na, nb = a["n_items"], b["n_items"]
    if same_dataset and na == nb:
        return None
    sa, sb = a.get("settings") or {}, b.get("settings") or {}
    limits = f"--limit {sa.get('limit')} vs {sb.get('limit')}" if sa.get("limit") != sb.get("limit") else ""
    count = f"{na} vs {nb} items" + (f", {limits}" if limits else "")
    if same_dataset:
        return f"the runs scored different numbers of items ({na} vs {nb}) of the same dataset" + (
            f" ({limits})" if limits else "")
    lm_eval = sa.get("task_format") == "lm-eval" and sb.get("task_format") == "lm-eval"
    if not lm_eval:
        return f"the runs scored different dataset files (SHA-256 differs; {count}): deltas mix items"
    da, db = sa.get("documents_sha256"), sb.get("documents_sha256")
    if da and db and da == db:
        return f"the runs scored different items of the same data ({count}): deltas mix items"
    if da and db:
        return f"the runs scored different data (SHA-256 of the task's documents differs; {count}): deltas mix items"
    if na != nb or sa.get("limit") != sb.get("limit"):
        return (f"the runs scored different item sets ({count}); whether their data differ too is unknown (a run "
                "stored without documents_sha256 hashes the scored items only)")
    return f"the runs scored different items (SHA-256 of the scored documents differs; {count}): deltas mix items"


def compare(run_a_id: int, run_b_id: int, db_url: str | None = None) -> dict:
    """Compare two stored runs: metric deltas (b - a) with stderr, the acc/acc_norm
    opposite-direction flag, ``same_dataset`` (equal dataset SHA-256), ``same_items`` and
    ``ties`` (``{"a": ..., "b": ...}``: each run's items decided by an exact tie per metric, None
    for a run stored before ties were counted).
    ``warning`` (one line) names what makes the deltas mix different things: other items
    (:func:`_item_sets`: the same data with another ``--limit``, or other data), different
    COMPARED_SETTINGS, metrics present in one run only. When the runs scored different items
    the opposite-direction flag is not raised (acc and acc_norm moving apart across different
    items says nothing about the output distribution's shape): ``opposite_directions`` is
    False and ``opposite_directions_withheld`` says why (None when nothing was withheld).
    Raises NotFoundError."""
    a = load_run(run_a_id, db_url, items=False)
    b = load_run(run_b_id, db_url, items=False)
    cmp = M.compare_runs(a["metrics"], b["metrics"])
    cmp.update(run_a={k: a[k] for k in ("id", "model", "task", "n_items")},
               run_b={k: b[k] for k in ("id", "model", "task", "n_items")},
               same_dataset=a["dataset_sha256"] == b["dataset_sha256"],
               ties={"a": (a.get("diagnostics") or {}).get("ties"), "b": (b.get("diagnostics") or {}).get("ties")})
    problems = []
    items = _item_sets(a, b, cmp["same_dataset"])
    cmp["same_items"] = items is None
    cmp["opposite_directions_withheld"] = None
    if items is not None:
        problems.append(items)
        if cmp["opposite_directions"]:
            cmp["opposite_directions_withheld"] = ("acc and acc_norm moved in opposite directions, but over different "
                                                   "items: that says nothing about the output distribution's shape")
            cmp["opposite_directions"], cmp["message"] = False, None
            problems.append("the acc/acc_norm opposite-directions diagnosis is withheld (the runs scored different items)")
    sa, sb = a.get("settings") or {}, b.get("settings") or {}
    differ = [k for k in COMPARED_SETTINGS if sa.get(k) != sb.get(k)
              and not (k == "requests_sha256" and items is not None)  # other items: other requests, said above
              and not (k in _NEWER_SETTINGS and (k not in sa or k not in sb))]
    if differ:
        problems.append("the runs differ in " + ", ".join(f"{k} ({sa.get(k)!r} vs {sb.get(k)!r})" for k in differ))
    only = sorted(set(a["metrics"]) ^ set(b["metrics"]))
    if only:
        problems.append(f"not compared (in one run only): {', '.join(only)}")
    if problems:
        cmp["warning"] = "; ".join(problems)
    return cmp


EXPORT_COLUMNS = ["run_id", "model", "item_index", "task", "doc_id", "gold", "golds", "pred_acc", "pred_acc_norm",
                  "pred_acc_bytes", "pred_acc_per_token", "pred_acc_pmi", "n_choices", "lls", "lls_null", "contexts",
                  "continuations", "null_contexts", "choices"]


def export_rows(run_id: int, db_url: str | None = None) -> list[dict]:
    """One flat row per stored item of run ``run_id``: run and model, item index, lm-eval task
    and doc id (None for judgecal task files), gold(s), each metric's prediction, per-choice
    log-likelihoods, the requests scored (contexts and continuations; acc_mutual_info's
    unconditional ones), and the stored ``choices`` JSON as it is. Raises NotFoundError, and
    UsageError for an lm-eval perplexity run (it has documents, not items)."""
    run = load_run(run_id, db_url)
    if (run.get("diagnostics") or {}).get("output_type") == "loglikelihood_rolling":
        raise UsageError(f"run {run_id} is an lm-eval perplexity run (loglikelihood_rolling): it has no items to "
                         "export; its documents (ll, tokens, windows, words, bytes) are in its diagnostics.documents "
                         "and in lm-eval's samples file (mc score --output-path DIR --log-samples)")
    rows = []
    for it in run["items"]:
        ch = it["choices"]
        reqs = [c.get("request") for c in ch]
        nulls = [c.get("null_request") for c in ch]
        rows.append({"run_id": run["id"], "model": run["model"], "item_index": it["item_index"], "task": it["task"],
                     "doc_id": it["doc_id"], "gold": it["gold"], "golds": it["golds"] or [it["gold"]],
                     "pred_acc": it["pred_acc"], "pred_acc_norm": it["pred_acc_norm"],
                     "pred_acc_bytes": it["pred_acc_bytes"], "pred_acc_per_token": it["pred_acc_per_token"],
                     "pred_acc_pmi": it["pred_acc_pmi"], "n_choices": len(ch), "lls": [c["ll"] for c in ch],
                     "lls_null": [c.get("ll_null") for c in ch] if any(c.get("ll_null") is not None for c in ch)
                     else None,
                     "contexts": [r[0] for r in reqs] if all(reqs) else None,
                     "continuations": [r[1] for r in reqs] if all(reqs) else None,
                     "null_contexts": [r[0] for r in nulls] if all(nulls) else None, "choices": ch})
    return rows


def export_items(run_id: int, path: str | Path, fmt: str | None = None, db_url: str | None = None) -> int:
    """Write :func:`export_rows` of run ``run_id`` to ``path`` (``-``: standard output) as
    JSONL or CSV (``fmt``; default from the extension, else JSONL; nested values are JSON text
    in CSV cells), through :func:`judgecal.views.export.write_rows` (atomic, regular files only).
    Returns the number of rows. Raises NotFoundError, UsageError."""
    from judgecal.views.export import check_target, write_rows

    path = Path(path)
    fmt = fmt or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
    if fmt not in ("jsonl", "csv"):
        raise UsageError(f"--format must be jsonl or csv, got {fmt!r}")
    check_target(path)
    return write_rows(export_rows(run_id, db_url), path, fmt, EXPORT_COLUMNS)
