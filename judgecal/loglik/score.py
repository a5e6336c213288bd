"""Score a multiple-choice task: requests -> per-choice log-likelihoods -> metrics.

``score_task`` is the library entry point the ``judgecal mc score`` wiring calls. Backends: a
local transformers model folder (:mod:`judgecal.loglik.hf`) or an OpenAI-compatible
completions endpoint (:mod:`judgecal.loglik.endpoint`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from judgecal.errors import UsageError
from judgecal.loglik import metrics as M
from judgecal.loglik.tasks import McTask

DEFAULT_NULL_CONTEXT = "Answer:"


@dataclass
class ChoiceResult:
    """One choice of one item: ``ll`` (nats, log p(delimiter + choice | context)),
    ``ll_null`` (nats under the null context, or None), ``n_tokens`` (continuation tokens),
    ``n_chars`` / ``n_bytes`` (of the raw choice, without the delimiter), ``is_greedy``
    (None when the backend cannot tell)."""

    ll: float
    ll_null: float | None
    n_tokens: int
    n_chars: int
    n_bytes: int
    is_greedy: bool | None


@dataclass
class ItemResult:
    """One item: ``index`` (0-based in the task), ``gold``, ``choices`` (ChoiceResult each),
    ``predictions`` (metric -> predicted index; acc_pmi None without a null pass), ``ties``
    (the metrics whose prediction an exact tie between choices decided:
    :func:`judgecal.loglik.metrics.item_ties`). Items of an
    lm-eval task also carry ``task`` (the leaf task), ``doc_id`` (lm-eval's), ``requests`` (the
    ``(context, continuation)`` pairs lm-eval built, unconditional ones included) and ``golds``
    (every gold index as lm-eval scores it; ``gold`` is the first)."""

    index: int
    gold: int
    choices: list[ChoiceResult]
    predictions: dict[str, int | None]
    task: str | None = None
    doc_id: int | None = None
    requests: list[tuple[str, str]] | None = None
    golds: list[int] | None = None
    ties: list[str] = field(default_factory=list)


@dataclass
class McResult:
    """A scoring run: ``task``, ``model``, ``backend`` ("hf" or "openai-completions"),
    ``settings``, ``items``, ``metrics`` (metric -> {value, stderr, n}), ``diagnostics``
    (:func:`judgecal.loglik.metrics.diagnostics`, with ``ties``: items decided by an exact tie
    per metric, plus ``boundary_fixes``), ``stats`` (timing
    and work: seconds, items_per_s, tokens, scored_rows...)."""

    task: str
    model: str
    backend: str
    settings: dict[str, Any]
    items: list[ItemResult]
    metrics: dict[str, dict]
    diagnostics: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        return asdict(self)


def _finish(task: McTask, items_ll: list[list[tuple[float, int, bool | None]]],
            null_ll: dict[str, float] | None) -> tuple[list[ItemResult], dict, dict]:
    results: list[ItemResult] = []
    for idx, (item, scored) in enumerate(zip(task.items, items_ll)):
        choices = []
        for c, (ll, ntok, greedy) in zip(item.choices, scored):
            lln = null_ll[task.target_delimiter + c] if null_ll is not None else None
            choices.append(ChoiceResult(ll, lln, ntok, M.n_chars(c), M.n_bytes(c), greedy))
        args = ([c.ll for c in choices], [c.n_chars for c in choices], [c.n_bytes for c in choices],
                [c.n_tokens for c in choices], [c.ll_null for c in choices] if null_ll is not None else None)
        results.append(ItemResult(idx, item.gold, choices, M.item_predictions(*args), ties=M.item_ties(*args)))
    metrics = M.aggregate([r.predictions for r in results], [r.gold for r in results])
    computed = [m for m in M.METRICS if m != "acc_pmi" or null_ll is not None]
    diags = M.diagnostics([it.choices for it in task.items], metrics,
                          ties=M.count_ties([r.ties for r in results], computed))
    return results, metrics, diags


def score_task(task: McTask, model_folder: str | Path | None = None, *, device: str = "cpu",
               dtype: str = "float32", batch_size: int | str = "auto", forward: str = "auto",
               null_context: str | None = DEFAULT_NULL_CONTEXT, limit: int | None = None,
               base_url: str | None = None, endpoint_model: str | None = None,
               api_key: str | None = None, scorer: Any = None,
               progress: Callable[[int], None] | None = None) -> McResult:
    """Score ``task`` and compute every metric.

    Backend: the transformers model in ``model_folder`` on ``device`` in ``dtype`` (or an
    already loaded ``scorer``, an :class:`~judgecal.loglik.hf.HFScorer`), or, with
    ``base_url``, an OpenAI-compatible completions endpoint serving ``endpoint_model``.
    ``batch_size``: items per forward pass, or "auto" (a token budget). ``forward``: the local
    body forward, "auto" (judgecal's fused Llama forward where the model is a plain Llama
    decoder, else the model's own), "fused" or "transformers" (:mod:`judgecal.loglik.fused`).
    ``null_context``: the
    PMI context (default "Answer:"; "" = lm-eval's acc_mutual_info, the BOS/EOS prefix token;
    None = no PMI pass, acc_pmi omitted). Null-context log-likelihoods are computed once per
    distinct continuation. ``limit``: first N items only.

    Returns an :class:`McResult` (ll in nats). Raises ModelError (model cannot load),
    UsageError (bad option), EndpointError (unusable endpoint answers), InputError
    (untokenizable continuation)."""
    if limit is not None:
        if limit < 1:
            raise UsageError(f"--limit must be >= 1, got {limit}")
        task = dataclasses.replace(task, items=task.items[:limit])
    delim = task.target_delimiter
    requests = [(it.context, [delim + c for c in it.choices]) for it in task.items]
    distinct: list[str] = []
    if null_context is not None:
        distinct = sorted({cont for _, conts in requests for cont in conts})
    t0 = time.perf_counter()
    c0 = time.process_time()
    stats: dict[str, Any] = {}
    if base_url is not None:
        from judgecal.loglik.endpoint import CompletionsScorer

        if not endpoint_model:
            raise UsageError("--base-url needs the served model name (--model NAME)")
        backend = "openai-completions"
        model_name = endpoint_model
        ep = CompletionsScorer(base_url, endpoint_model, api_key=api_key)
        pairs = [(ctx, cont) for ctx, conts in requests for cont in conts]
        if null_context is not None:
            pairs += [(null_context, cont) for cont in distinct]
        scored = ep.score_pairs(pairs)
        it = iter(scored)
        items_ll = [[next(it) for _ in conts] for _, conts in requests]
        null_ll = {cont: next(it)[0] for cont in distinct} if null_context is not None else None
        stats["requests"] = len(pairs)
        stats["http_requests"] = ep.requests
        stats["prompts_per_request"] = ep.per_request
    else:
        from judgecal.loglik.hf import HFScorer, RunStats

        if scorer is None:
            if model_folder is None:
                raise UsageError("give a model folder or --base-url")
            scorer = HFScorer(model_folder, device=device, dtype=dtype, forward=forward)
            t0, c0 = time.perf_counter(), time.process_time()  # loading is not scoring time
        backend = "hf"
        model_name = str(model_folder) if model_folder is not None else "(loaded)"
        groups = list(requests)
        if null_context is not None:
            groups.append((null_context, distinct))
        enc = scorer.encoder.encode_groups(groups)
        if null_context is not None and len(distinct) > 64:
            # one group per null-context chunk, so that the rows stay short and batchable
            null_g = enc.pop()
            from judgecal.loglik.split import EncodedGroup

            enc += [EncodedGroup(null_g.ctx, null_g.conts[i:i + 16]) for i in range(0, len(null_g.conts), 16)]
        run_stats = RunStats()
        out = scorer.score_groups(enc, batch_size=batch_size, stats=run_stats, progress=progress)
        items_ll = [[(s.ll, s.n_tokens, s.is_greedy) for s in row] for row in out[:len(requests)]]
        null_ll = None
        if null_context is not None:
            flat = [s.ll for row in out[len(requests):] for s in row]
            null_ll = dict(zip(distinct, flat))
        stats.update(tokens=run_stats.tokens, padded_tokens=run_stats.padded_tokens,
                     scored_rows=run_stats.scored_rows, forward_passes=run_stats.forward_passes,
                     boundary_fixes=run_stats.boundary_fixes,
                     shared_prefix_units=run_stats.extra.get("shared_prefix_units", 0),
                     shared_prefix_tokens_saved=run_stats.extra.get("shared_prefix_tokens_saved", 0),
                     truncated_requests=run_stats.extra.get("truncated_requests", 0),
                     n_body_params=scorer.n_body_params, n_head_params=scorer.n_head_params)
    stats["seconds"] = time.perf_counter() - t0
    stats["cpu_seconds"] = time.process_time() - c0
    stats["items_per_s"] = len(task.items) / stats["seconds"] if stats["seconds"] > 0 else None
    results, metrics, diags = _finish(task, items_ll, null_ll)
    diags["boundary_fixes"] = stats.get("boundary_fixes", 0)
    diags["truncated_requests"] = stats.get("truncated_requests", 0)
    if base_url is not None:
        for note in (ep.fallback, ep.alignment_note()):
            if note:
                diags.setdefault("notes", []).append(note)
    settings = {"device": device, "dtype": dtype, "batch_size": batch_size, "null_context": null_context,
                "forward": getattr(scorer, "forward_name", None) if base_url is None else None,
                "limit": limit, "target_delimiter": delim, "task_format": task.format}
    if base_url is not None:
        settings["base_url"] = base_url
    return McResult(task.name, model_name, backend, settings, results, metrics, diags, stats)


def compare_runs(a_metrics: dict, b_metrics: dict) -> dict:
    """Metric deltas ``b - a`` and the acc/acc_norm opposite-direction flag; see
    :func:`judgecal.loglik.metrics.compare_runs`."""
    return M.compare_runs(a_metrics, b_metrics)
