"""lm-evaluation-harness's results and samples files for a judgecal run of lm-eval tasks.

``judgecal mc score --output-path DIR [--log-samples]`` writes what ``lm_eval --output_path DIR
[--log_samples]`` writes, through lm-eval's own code:

- the results dict is what ``lm_eval.evaluator.evaluate`` returned for the run (``results``,
  ``groups``, ``group_subtasks``, ``configs``, ``versions``, ``n-shot``, ``higher_is_better``,
  ``n-samples``), completed as ``lm_eval.simple_evaluate`` completes it (:func:`complete_results`:
  ``config`` with the model, its arguments and lm-eval's execution settings, ``git_hash``,
  ``date``, lm-eval's environment and tokenizer information);
- lm-eval's ``EvaluationTracker`` writes it (``task_hashes`` and the general config tracker's
  fields added, as lm-eval adds them) to ``DIR/<model name sanitized>/results_<date>.json``
  (or next to ``DIR`` when it ends in ``.json``) and, with samples, one
  ``samples_<task>_<date>.jsonl`` per task, every line in lm-eval's shape (``doc_id``, ``doc``,
  ``target``, ``arguments``, ``resps``, ``filtered_resps``, ``filter``, ``metrics``,
  ``doc_hash``, ``prompt_hash``, ``target_hash``, the metric values).

judgecal's own figures are under keys lm-eval does not use: ``judgecal`` in the results file
(run id, version, the run's metrics with judgecal's extras such as acc_bytes and acc_per_token,
per-task extras, notes, acc_norm - acc, ``ties``: items decided by an exact tie per metric) and
``judgecal`` on each sample line (tokens, characters and bytes per choice, the prediction under
each of judgecal's metrics, ``ties``: the metrics whose prediction an exact tie decided).
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from judgecal.errors import InputError, UsageError


def check_output_path(output_path: str | Path) -> Path:
    """Make sure ``output_path`` (a folder, or a ``*.json`` file name whose folder is used) can
    be written, before anything is scored: the folder is created; a file in its place, or a
    folder that cannot be written to, is refused (one line)."""
    p = Path(output_path).expanduser()
    folder = p.parent if p.suffix == ".json" else p
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--output-path {output_path}: {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".judgecal-write-test-{time.time_ns()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--output-path {output_path}: cannot write there ({exc.strerror or exc})") from None
    return p


def complete_results(results: dict, lm: Any, *, model: str, model_args: Mapping[str, Any], batch_size: Any,
                     device: str | None, use_cache: str | None, limit: int | float | None, bootstrap_iters: int,
                     seeds: Mapping[str, int | None], start_date: float, env_info: bool = True) -> dict:
    """A copy of ``results`` (``lm_eval.evaluator.evaluate``'s dict) completed as lm-eval's
    ``simple_evaluate`` completes it: ``config`` (model name and arguments, the LM's
    ``get_model_info``, batch size(s), device, use_cache, limit, bootstrap_iters, gen_kwargs,
    the four seeds), ``git_hash``, ``date`` and, with ``env_info``, lm-eval's ``add_env_info``
    and ``add_tokenizer_info``. ``seeds``: ``random_seed``, ``numpy_seed``, ``torch_seed``,
    ``fewshot_seed``."""
    from lm_eval.loggers.utils import add_env_info, add_tokenizer_info, get_git_commit_hash

    out = copy.deepcopy({k: v for k, v in results.items() if k != "samples"})
    if "samples" in results:
        out["samples"] = results["samples"]  # not copied (large); written, never changed, below
    out["config"] = {"model": model, "model_args": dict(model_args)}
    if hasattr(lm, "get_model_info"):
        out["config"].update(lm.get_model_info())
    out["config"].update({"batch_size": batch_size,
                          "batch_sizes": list(lm.batch_sizes.values()) if hasattr(lm, "batch_sizes") else [],
                          "device": device, "use_cache": use_cache, "limit": limit,
                          "bootstrap_iters": bootstrap_iters, "gen_kwargs": None,
                          "random_seed": seeds.get("random_seed"), "numpy_seed": seeds.get("numpy_seed"),
                          "torch_seed": seeds.get("torch_seed"), "fewshot_seed": seeds.get("fewshot_seed")})
    out["git_hash"] = get_git_commit_hash()
    out["date"] = start_date
    if env_info:
        add_env_info(out)
    add_tokenizer_info(out, getattr(lm, "lm", lm))  # CachingLM wraps the model
    return out


def new_tracker(output_path: str | Path, *, model_args: Mapping[str, Any], system_instruction: str | None,
                chat_template: str | None, fewshot_as_multiturn: bool) -> Any:
    """lm-eval's ``EvaluationTracker`` for ``output_path``, its experiment arguments logged as
    lm-eval's ``simple_evaluate`` logs them (model source ``judgecal``). Create it before the
    run: it times the evaluation (``total_evaluation_time_seconds``)."""
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(Path(output_path).expanduser()))
    tracker.general_config_tracker.log_experiment_args(
        model_source="judgecal", model_args=dict(model_args), system_instruction=system_instruction,
        chat_template=chat_template, fewshot_as_multiturn=fewshot_as_multiturn)
    return tracker


def sample_extras(items: list) -> dict[tuple[str, int], dict]:
    """(task, doc_id) -> judgecal's figures for that document's sample line."""
    out = {}
    for it in items:
        out[(it.task, it.doc_id)] = {
            "n_tokens": [c.n_tokens for c in it.choices], "n_chars": [c.n_chars for c in it.choices],
            "n_bytes": [c.n_bytes for c in it.choices], "predictions": dict(it.predictions), "golds": it.golds,
            "ties": list(getattr(it, "ties", []))}
    return out


def write_files(full: dict, tracker: Any, *, log_samples: bool, extra: Mapping[str, Any],
                items: list) -> dict[str, Any]:
    """Write ``full`` (:func:`complete_results`) with ``tracker`` (:func:`new_tracker`) as
    lm-eval's CLI writes its results: ``save_results_aggregated`` and, with ``log_samples``,
    ``save_results_samples`` per task in ``configs``. ``extra`` goes under the results file's
    ``judgecal`` key; each sample line gets a ``judgecal`` key from ``items``. Returns
    ``{"results": path, "samples": {task: path}}``. lm-eval's tracker logs a failure to write
    and goes on; here a file that is not there afterwards raises InputError."""
    from judgecal.loglik.lmeval_tasks import quiet_lm_eval

    results = dict(full)
    samples = results.pop("samples", None) or {}
    results["judgecal"] = dict(extra)
    per_doc = sample_extras(items)
    logged: Counter[str] = Counter()
    with quiet_lm_eval(logged):
        tracker.save_results_aggregated(results=results, samples=samples if log_samples else None)
    path = Path(tracker.output_path)
    date_id = getattr(tracker, "date_id", None)
    if path.suffix == ".json":
        results_file, folder = path.with_name(f"{path.stem}_{date_id}.json"), path.parent
    else:
        folder = path / str(tracker.general_config_tracker.model_name_sanitized)
        results_file = folder / f"results_{date_id}.json"
    if date_id is None or not results_file.is_file():
        why = "; ".join(m for m in logged if "save" in m.lower()) or "lm-eval's tracker wrote nothing"
        raise InputError(f"--output-path: the results file was not written ({why})", source=str(path))
    written: dict[str, Any] = {"results": str(results_file), "samples": {}}
    if log_samples:
        for task_name in results["configs"]:
            lines = []
            for s in samples.get(task_name, []):
                s = dict(s)
                x = per_doc.get((task_name, s["doc_id"]))
                if x is not None:
                    s["judgecal"] = x
                lines.append(s)
            with quiet_lm_eval(logged):
                tracker.save_results_samples(task_name=task_name, samples=lines)
            f = folder / f"samples_{task_name}_{date_id}.jsonl"
            if not f.is_file() and lines:
                raise InputError(f"--output-path: the samples file of {task_name} was not written", source=str(f))
            written["samples"][task_name] = str(f)
    return written


def judgecal_block(res: Any, run_id: int | None) -> dict[str, Any]:
    """What the results file carries under ``judgecal``: run id, version, the run's metrics
    (lm-eval's headline and judgecal's extras, each with its ``source``), each task's extras,
    notes, acc_norm - acc, exact ties per metric, the settings that are judgecal's."""
    from judgecal import __version__

    diags = res.diagnostics
    return {"run_id": run_id, "judgecal_version": __version__, "task": res.task, "metrics": res.metrics,
            "extras_by_task": {t: v.get("extras", {}) for t, v in (diags.get("by_task") or {}).items()},
            "acc_norm_minus_acc": diags.get("acc_norm_minus_acc"), "ties": diags.get("ties"),
            "notes": diags.get("notes", []),
            "task_config_sha256": res.settings.get("task_config_sha256"),
            "requests_sha256": res.settings.get("requests_sha256"),
            "documents_sha256": res.settings.get("documents_sha256"),
            "forward": res.settings.get("forward"), "backend": res.backend}


def dumps(obj: Any) -> str:
    """JSON as lm-eval dumps its files (``handle_non_serializable``, indent 2, not ASCII-escaped)."""
    from lm_eval.utils import handle_non_serializable

    return json.dumps(obj, indent=2, default=handle_non_serializable, ensure_ascii=False)
