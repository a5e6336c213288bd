"""``judgecal mc``: score a multiple-choice task with a local model or a completions endpoint,
store the run (``mc_run`` + one ``mc_item_result`` per item), list, load and compare runs.

Wiring only: task loading, scoring and metrics live in :mod:`judgecal.loglik`; the tables in
:mod:`judgecal.db.models`.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import select

from judgecal.db import models as m
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import InputError, NotFoundError
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


def score(task_path: str | Path, model: str, *, device: str = "cpu", dtype: str = "float32",
          batch_size: int | str = "auto", forward: str = "auto",
          null_context: str | None = DEFAULT_NULL_CONTEXT, limit: int | None = None, prompt: str = DEFAULT_PROMPT, base_url: str | None = None,
          db_url: str | None = None, store: bool = True,
          progress: Callable[[int], None] | None = None) -> tuple[int | None, McResult]:
    """Load ``task_path``, score it and store the run. ``model``: "smollm2", a model folder,
    or (with ``base_url``) the served model name. Returns ``(run_id or None, McResult)``.
    Raises InputError, ModelError, EndpointError, UsageError, DatabaseError."""
    task = load_task(task_path, prompt=prompt)
    if base_url is None:
        from judgecal.localmodel import resolve_model

        folder = resolve_model(model)
        result = score_task(task, folder, device=device, dtype=dtype, batch_size=batch_size, forward=forward,
                            null_context=null_context, limit=limit, progress=progress)
        result.model = model if model == "smollm2" else str(folder)
    else:
        result = score_task(task, None, batch_size=batch_size, null_context=null_context, limit=limit,
                            base_url=base_url, endpoint_model=model)
    result.settings["prompt"] = prompt if task.format == "jsonl" else None
    if not store:
        return None, result
    sha = file_sha256(task_path)
    if task.data_path is not None:  # a YAML task: hash the YAML and the data file it reads
        sha = hashlib.sha256((sha + file_sha256(task.data_path)).encode()).hexdigest()
    engine = get_engine(db_url)
    try:
        with session_scope(engine) as s:
            run = m.McRun(model=result.model, task=result.task, task_path=str(Path(task_path).resolve()),
                          dataset_sha256=sha, backend=result.backend, n_items=len(result.items),
                          settings=result.settings, metrics=result.metrics,
                          diagnostics={**result.diagnostics, "stats": result.stats})
            s.add(run)
            s.flush()
            s.add_all([
                m.McItemResult(run_id=run.id, item_index=it.index, gold=it.gold,
                               choices=[asdict(c) for c in it.choices],
                               pred_acc=it.predictions["acc"], pred_acc_norm=it.predictions["acc_norm"],
                               pred_acc_bytes=it.predictions["acc_bytes"],
                               pred_acc_per_token=it.predictions["acc_per_token"],
                               pred_acc_pmi=it.predictions["acc_pmi"])
                for it in result.items
            ])
            run_id = run.id
    finally:
        engine.dispose()
    return run_id, result


def _run_dict(run: m.McRun) -> dict[str, Any]:
    return {"id": run.id, "model": run.model, "task": run.task, "task_path": run.task_path,
            "dataset_sha256": run.dataset_sha256, "backend": run.backend, "n_items": run.n_items,
            "settings": run.settings, "metrics": run.metrics, "diagnostics": run.diagnostics,
            "created_at": run.created_at.isoformat() if run.created_at else None}


def list_runs(db_url: str | None = None, *, model: str | None = None) -> list[dict]:
    """Every stored run (newest first), optionally of one model, as dicts (no item rows)."""
    engine = get_engine(db_url)
    try:
        with session_scope(engine) as s:
            q = select(m.McRun).order_by(m.McRun.id.desc())
            if model:
                q = q.where(m.McRun.model == model)
            return [_run_dict(r) for r in s.scalars(q)]
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
                out["items"] = [{"item_index": r.item_index, "gold": r.gold, "choices": r.choices,
                                 "pred_acc": r.pred_acc, "pred_acc_norm": r.pred_acc_norm,
                                 "pred_acc_bytes": r.pred_acc_bytes, "pred_acc_per_token": r.pred_acc_per_token,
                                 "pred_acc_pmi": r.pred_acc_pmi} for r in rows]
            return out
    finally:
        engine.dispose()


# settings that change what is scored (not how fast): a comparison across them is flagged
COMPARED_SETTINGS = ("prompt", "null_context", "target_delimiter", "task_format", "dtype")


def compare(run_a_id: int, run_b_id: int, db_url: str | None = None) -> dict:
    """Compare two stored runs: metric deltas (b - a) with stderr, the acc/acc_norm
    opposite-direction flag, and ``same_dataset`` (equal dataset SHA-256). ``warning`` (one
    line) names what makes the deltas mix different things: another dataset file, another
    number of items, different COMPARED_SETTINGS, metrics present in one run only. Raises
    NotFoundError."""
    a = load_run(run_a_id, db_url, items=False)
    b = load_run(run_b_id, db_url, items=False)
    cmp = M.compare_runs(a["metrics"], b["metrics"])
    cmp.update(run_a={k: a[k] for k in ("id", "model", "task", "n_items")},
               run_b={k: b[k] for k in ("id", "model", "task", "n_items")},
               same_dataset=a["dataset_sha256"] == b["dataset_sha256"])
    problems = []
    if not cmp["same_dataset"]:
        problems.append("the runs scored different dataset files (SHA-256 differs): deltas mix items")
    if a["n_items"] != b["n_items"]:
        problems.append(f"the runs scored different numbers of items ({a['n_items']} vs {b['n_items']})")
    sa, sb = a.get("settings") or {}, b.get("settings") or {}
    differ = [k for k in COMPARED_SETTINGS if sa.get(k) != sb.get(k)]
    if differ:
        problems.append("the runs differ in " + ", ".join(f"{k} ({sa.get(k)!r} vs {sb.get(k)!r})" for k in differ))
    only = sorted(set(a["metrics"]) ^ set(b["metrics"]))
    if only:
        problems.append(f"not compared (in one run only): {', '.join(only)}")
    if problems:
        cmp["warning"] = "; ".join(problems)
    return cmp
