"""lm-eval perplexity tasks (``output_type: loglikelihood_rolling``) as a judgecal run.

lm-eval builds one ``loglikelihood_rolling`` request a document (its ``doc_to_target`` text),
:meth:`judgecal.loglik.lmeval_lm.JudgecalLM.loglikelihood_rolling` scores it with lm-eval's
rolling windows, and lm-eval computes the metrics (word_perplexity, byte_perplexity,
bits_per_byte; ``lm_eval/api/metrics.py``: ``weighted_perplexity`` = exp(-sum ll / sum words
or bytes), ``bits_per_byte`` = -sum ll / sum bytes / ln 2). :func:`rolling_result` turns those
results into an :class:`~judgecal.loglik.score.McResult` with no multiple-choice items: the
top-level metrics are lm-eval's (``source: lm-eval``), bits_per_byte is added from the same
sums when the metric_list lacks it (``source: judgecal extra``), and every document's figures
(task, doc_id, ll in nats, tokens, windows, words, bytes) are in ``diagnostics.documents``.
A run is of multiple-choice tasks or of perplexity tasks, not both (:func:`check_output_types`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from typing import Any, Mapping

from judgecal.errors import InputError

ROLLING = "loglikelihood_rolling"
SUPPORTED = ("multiple_choice", ROLLING)
PPL_METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")


def check_output_types(name: str, types: Mapping[str, str], src: str | None = None) -> bool:
    """``types``: task name -> lm-eval ``output_type`` (lm-eval's default is generate_until).
    Returns True when every task is ``loglikelihood_rolling`` (a perplexity run), False when
    every one is ``multiple_choice``. Raises InputError (one line, naming the tasks) for any
    other type, or for a mix of the two."""
    bad = {n: o for n, o in types.items() if o not in SUPPORTED}
    if bad:
        shown = ", ".join(f"{n} ({o})" for n, o in list(bad.items())[:5])
        raise InputError(f"judgecal mc scores output_type multiple_choice or loglikelihood_rolling (perplexity) "
                         f"only; {len(bad)} task(s) of {name!r} are not: {shown}", source=src)
    kinds = set(types.values())
    if len(kinds) > 1:
        rolling = [n for n, o in types.items() if o == ROLLING][:3]
        raise InputError(f"{name!r} mixes multiple_choice and loglikelihood_rolling tasks ({', '.join(rolling)} "
                         "...): score perplexity tasks in a call of their own", source=src)
    return kinds == {ROLLING}


def _pair(sample: Mapping[str, Any], metric: str) -> tuple[float, int] | None:
    v = sample.get(metric)
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return float(v[0]), int(v[1])
    return None


def _no_nan(metrics: dict[str, dict]) -> dict[str, dict]:
    """lm-eval gives perplexities no stderr ("N/A"): None, not NaN (JSON, PostgreSQL)."""
    return {m: {**v, "stderr": None if v["stderr"] != v["stderr"] else v["stderr"]} for m, v in metrics.items()}


def pooled(docs: list[dict]) -> dict[str, float]:
    """lm-eval's aggregations over ``docs`` (each with ``ll`` nats, ``words``, ``bytes``):
    word_perplexity = exp(-sum ll / sum words), byte_perplexity = exp(-sum ll / sum bytes),
    bits_per_byte = -sum ll / sum bytes / ln 2 (``lm_eval/api/metrics.py``). A figure whose
    count is unknown for some document (None) or zero is left out."""
    out: dict[str, float] = {}
    ll = sum(d["ll"] for d in docs)
    if docs and all(d.get("words") is not None for d in docs) and sum(d["words"] for d in docs) > 0:
        out["word_perplexity"] = math.exp(-ll / sum(d["words"] for d in docs))
    if docs and all(d.get("bytes") is not None for d in docs) and sum(d["bytes"] for d in docs) > 0:
        n = sum(d["bytes"] for d in docs)
        out["byte_perplexity"] = math.exp(-ll / n)
        out["bits_per_byte"] = -ll / n / math.log(2)
    return out


def rolling_result(lt: Any, results: dict, lm: Any, *, settings: dict[str, Any], model: str, backend: str,
                   warnings: Counter[str], fewshot_notes: Mapping[str, str]):
    """lm-eval's results (with samples) of perplexity tasks as an McResult with no items.
    ``metrics``: lm-eval's for the task or the group (``source: lm-eval``; lm-eval gives no
    stderr for perplexities: None), plus bits_per_byte (``source: judgecal extra``) where the
    metric_list lacks it and the byte counts are known; over several tasks without a group
    aggregate, the three figures pooled over every document (``source: judgecal pooled``).
    ``diagnostics``: ``output_type``, ``documents`` (one dict a document: task, doc_id, ll
    nats, tokens, windows, words, bytes), ``by_task``, ``groups``, ``max_length`` and
    ``rolling_windows`` (the scorer's window size and the windows scored), notes, lm-eval's
    warnings. ``settings`` gain ``requests_sha256`` (over the texts), ``documents_sha256``,
    ``task_config_sha256``, ``max_length``. Raises InputError when no document was scored."""
    from judgecal.loglik.lmeval_tasks import _lm_eval_metrics, documents_sha256
    from judgecal.loglik.score import McResult

    docs: list[dict] = []
    doc_hash, req_hash = hashlib.sha256(), hashlib.sha256()
    by_task: dict[str, dict] = {}
    n_shot = results.get("n-shot", {})
    tokens = getattr(lm, "rolling_tokens", {})
    windows = getattr(lm, "rolling_windows", {})
    for tname in lt.tasks:
        samples = sorted(results["samples"].get(tname, []), key=lambda s: s["doc_id"])
        filters = list(dict.fromkeys(s["filter"] for s in samples))
        samples = [s for s in samples if not filters or s["filter"] == filters[0]]
        entry = results["results"].get(tname, {})
        task_docs = []
        doc_hash.update(tname.encode() + b"\0")
        for s in samples:
            text = str(s["arguments"][0][0])
            ll = float(s["filtered_resps"][0])
            w = _pair(s, "word_perplexity")
            b = _pair(s, "byte_perplexity") or _pair(s, "bits_per_byte")
            task_docs.append({"task": tname, "doc_id": int(s["doc_id"]), "ll": ll, "tokens": tokens.get(text),
                              "windows": windows.get(text), "words": w[1] if w else None,
                              "bytes": b[1] if b else None})
            doc_hash.update(str(s["doc_hash"]).encode() + b"\n")
            req_hash.update(json.dumps([text], ensure_ascii=False).encode() + b"\n")
        metrics = _no_nan(_lm_eval_metrics(entry, len(task_docs)))
        extras = {}
        figures = pooled(task_docs)
        if "bits_per_byte" not in metrics and "bits_per_byte" in figures:
            extras["bits_per_byte"] = {"value": figures["bits_per_byte"], "stderr": None,
                                       "n": len(task_docs), "source": "judgecal extra"}
        by_task[tname] = {"alias": entry.get("alias", tname), "num_fewshot": n_shot.get(tname), "n": len(task_docs),
                          "metrics": metrics, "extras": extras}
        docs.extend(task_docs)
    if not docs:
        raise InputError(f"lm-eval task {lt.name!r}: no documents were scored")
    groups: dict[str, dict] = {}
    for gname in lt.groups:
        entry = results.get("groups", {}).get(gname) or results["results"].get(gname) or {}
        members = {x.task_name for x in lt.groups[gname].get_all_tasks()}
        n = sum(by_task[t]["n"] for t in by_task if t in members)
        groups[gname] = {"alias": entry.get("alias", gname), "n": n, "metrics": _no_nan(_lm_eval_metrics(entry, n))}
    notes: list[str] = []
    if lt.kind == "group" and groups.get(lt.name, {}).get("metrics"):
        top = dict(groups[lt.name]["metrics"])
    elif len(by_task) == 1:
        only = next(iter(by_task.values()))
        top = {**only["metrics"], **only["extras"]}
    else:
        top = {m: {"value": v, "stderr": None, "n": len(docs), "source": "judgecal pooled"}
               for m, v in pooled(docs).items()}
        notes.append(f"{len(by_task)} perplexity tasks without a group aggregate: lm-eval reports each task (by "
                     "task); the top-level figures are lm-eval's formulas on every document pooled")
    extra_names = [m for m, v in top.items() if v.get("source") == "judgecal extra"]
    if extra_names:
        notes.append(f"judgecal extras (not in the task's metric_list): {', '.join(extra_names)}, from the same "
                     "log-likelihoods and byte counts")
    for tname, why in fewshot_notes.items():
        notes.append(f"--num-fewshot not applied to {tname}: {why}")
    notes.extend(lt.notes)
    if warnings:
        notes.append(f"lm-eval logged {sum(warnings.values())} warning(s), {len(warnings)} distinct "
                     "(diagnostics.lm_eval_warnings)")
    headline = [m for m in PPL_METRICS if m in top] + [m for m in top if m not in PPL_METRICS]
    diags = {"output_type": ROLLING, "headline": headline, "notes": notes, "documents": docs, "by_task": by_task,
             "groups": groups, "lm_eval_warnings": dict(warnings.most_common(20)), "item_gold_notes": {},
             "acc_norm_minus_acc": None, "ties": None, "max_length": getattr(lm, "max_length", None),
             "rolling_windows": sum(d["windows"] or 0 for d in docs)}
    nf = {t: v["num_fewshot"] for t, v in by_task.items()}
    docs_sha, docs_n = documents_sha256(lt)
    settings = {**settings, "num_fewshot": next(iter(nf.values())) if len(set(nf.values())) == 1 else nf,
                "documents_sha256": docs_sha, "documents": docs_n, "data_sources": dict(lt.data_sources),
                "task_config_sha256": lt.config_sha256, "requests_sha256": req_hash.hexdigest(),
                "max_length": getattr(lm, "max_length", None), "output_type": ROLLING}
    res = McResult(lt.name, model, backend, settings, [], top, diags)
    res.dataset_sha256 = doc_hash.hexdigest()
    return res


def n_documents(res: Any) -> int:
    """The units a run scored: its items, or for a perplexity run its documents."""
    return len(res.items) or len(res.diagnostics.get("documents") or [])
