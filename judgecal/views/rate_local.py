"""``judgecal rate --local``: the runner that reads verdict distributions from the local model.

The same work queue as the served path (:mod:`judgecal.db.queue`: pending rows, claims, batched
writes guarded by the claim, hand-back on exit), the same prompt rendering
(:func:`judgecal.views.rate.render_row`), and instead of one HTTP call per row, one batched
forward pass per claimed batch (:class:`judgecal.loglik.verdicts.VerdictScorer`).

Each row gets what the served path stores (docs/rating.md):

- ``raw_output``: the greedy text (:attr:`judgecal.loglik.verdicts.Scored.text`: the verdict
  prefix and what greedy decoding writes after it, up to the end of turn or
  :data:`~judgecal.loglik.verdicts.GREEDY_MAX_TOKENS` tokens);
- ``status``, ``score`` (pointwise) / ``verdict`` (pairwise) and ``error``: that text read by
  :func:`judgecal.views.rate.read_row_output`, the very function the served path reads an
  endpoint's answer with: the same text is stored alike on both paths (an off-scale
  ``Rating: 15`` is unparsed with the reason, a conflicting ``[[7]] or [[8]]`` too), and so is
  a judgment whose distribution puts less than :data:`judgecal.judge.distribution.MIN_IN_SCALE`
  on the scale (unparsed whatever the text says, on both paths);
- ``distribution``: :func:`judgecal.judge.distribution.from_logliks` (``source`` "forward";
  ``greedy``: the stored verdict when it is a verdict of the scale, else null), extra
  information that changes the status only by that rule; ``expected_score``: its mean (kept on
  an unparsed row, as the served path keeps a ``--logprobs`` mean); ``preference``: its
  P(a) + P(tie)/2 on a parsed verdict (None when unparsed, as served);
- ``prompt_tokens``: the context's tokens; ``completion_tokens``: the tokens greedy decoding
  wrote (the end of turn included); ``latency_s``: the batch's seconds divided by its rows;
  ``attempts``: 1.

A row whose prompt cannot be rendered fails with the reason (``failed_by_cause.render``), one
longer than the model's positions fails too (``failed_by_cause.model``); every other row is ok
or unparsed, as its greedy text reads.
Ctrl-C / SIGTERM: the batches already scored are written, the claimed rest goes back to
'pending', and the summary says ``interrupted``.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, Optional

from judgecal.db import models as m
from judgecal.db import queue
from judgecal.judge import distribution as D
from judgecal.judge import parse
from judgecal.judge.client import storable
from judgecal.judge.prompts import Prompt
from judgecal.judge.sandbox import RenderAborted
from judgecal.loglik.verdicts import PAIRWISE_LETTERS

CLAIM_ROWS = 128  # rows claimed and scored together (one scorer call: packing and shared prefixes over them)


class _Stopped(BaseException):
    """SIGTERM during the run (SIGINT arrives as KeyboardInterrupt)."""


class _NoOutage:
    def summary(self) -> dict[str, Any]:
        return {"pauses": 0, "paused_s": 0.0, "gave_up": False, "last_reason": None}


class LocalRunner:
    """Claim -> render -> one batched scoring call -> write, until the queue is empty.
    ``counts``/``failed_by_cause``/``attempts``/``released``/``outage`` as the served runner's."""

    def __init__(self, engine, plan, prompt: Prompt, scorer: Any, prefix: str, render_time_limit_s: float,
                 claim_rows: int = CLAIM_ROWS):
        self.engine, self.plan, self.prompt, self.scorer, self.prefix = engine, plan, prompt, scorer, prefix
        self.render_time_limit_s = render_time_limit_s
        self.claim_rows = claim_rows
        self.counts = {"ok": 0, "unparsed": 0, "failed": 0}
        self.failed_by_cause = {"model": 0, "render": 0, "internal": 0}
        self.attempts = 0
        self.released = 0
        self.outage = _NoOutage()
        self.local_summary: dict[str, Any] = {}
        if plan.pairwise:
            self.verdicts = list(PAIRWISE_LETTERS)
        else:
            self.verdicts = [str(v) for v in D.scale_values(prompt.scale_min, prompt.scale_max)]

    def _base(self, row: dict) -> dict[str, Any]:
        out: dict[str, Any] = {"id": row["id"], "attempts": 1, "latency_s": None, "prompt_tokens": None,
                               "completion_tokens": None, "updated_at": m.utcnow(), "raw_output": None,
                               "distribution": None, "error": None}
        if self.plan.pairwise:
            out["verdict"] = out["preference"] = None
        else:
            out["score"] = out["expected_score"] = None
        return out

    def _failed(self, row: dict, reason: str, cause: str) -> dict[str, Any]:
        out = self._base(row)
        out.update(status="failed", error=reason)
        self.failed_by_cause[cause] += 1
        return out

    def _result(self, row: dict, scored, seconds: float) -> dict[str, Any]:
        """The row's stored values from its :class:`~judgecal.loglik.verdicts.Scored` reading:
        status, score / verdict and error from the greedy text (the served path's reading),
        the distribution beside them."""
        from judgecal.views.rate import read_row_output

        if scored.error:
            return self._failed(row, scored.error, "model")
        pairwise = self.plan.pairwise
        keys = [D.LETTERS[row["position"]][v] for v in self.verdicts] if pairwise else self.verdicts
        dist = D.from_logliks(keys, scored.lls, prefix=self.prefix, greedy=None)
        reading = read_row_output(self.prompt, row, pairwise, scored.text, dist)  # (too little on the scale: unparsed)
        chosen = reading.verdict if pairwise else (D.score_key(reading.score) if reading.score is not None else None)
        if dist is not None:
            dist["greedy"] = chosen if chosen in keys else None
        out = self._base(row)
        raw, _ = storable(scored.text)
        out.update(reading.fields(pairwise), distribution=dist, raw_output=raw, prompt_tokens=scored.n_tokens,
                   completion_tokens=scored.completion_tokens, latency_s=seconds)
        if pairwise:
            if reading.verdict is not None:  # soft from the distribution; the verdict's 1 / 0 / 0.5 without one
                pref = D.preference(dist)
                out.update(preference=pref if pref is not None else parse.PREFERENCE_OF_VERDICT[reading.verdict])
        else:
            out.update(expected_score=D.expected(dist))
        return out

    def rate_rows(self, rows: list[dict], progress: Any = None) -> list[dict]:
        """Results for the claimed ``rows`` (one scoring call for all the renderable ones)."""
        from judgecal.views.rate import render_row

        results: dict[int, dict] = {}
        contexts, todo = [], []
        for row in rows:
            try:
                messages = render_row(self.prompt, row, self.plan.pairwise, self.render_time_limit_s)
                contexts.append(self.scorer.context(messages, self.prefix))
                todo.append(row)
            except RenderAborted:
                raise KeyboardInterrupt from None
            except Exception as exc:  # noqa: BLE001 - InputError or anything a template raises: this row's failure
                reason = " ".join(str(exc).split()) or type(exc).__name__
                results[row["id"]] = self._failed(row, f"cannot render the prompt: {reason}", "render")
        if todo:
            t0 = time.perf_counter()
            scored = self.scorer.score(contexts, self.verdicts, self.prefix, progress=progress)
            per_row = (time.perf_counter() - t0) / len(todo)
            for row, sc in zip(todo, scored):
                try:
                    results[row["id"]] = self._result(row, sc, per_row)
                except Exception as exc:  # noqa: BLE001 - a reading bug must not lose the row
                    results[row["id"]] = self._failed(row, f"internal error: {type(exc).__name__}: {exc}", "internal")
        return [results[r["id"]] for r in rows]

    def run(self, progress: Any = None) -> None:
        """Rate every pending row of the plan; on any exit, hand back what is still claimed."""
        try:
            while True:
                rows = queue.claim(self.engine, self.plan, self.claim_rows)
                if not rows:
                    break
                out = self.rate_rows(rows, progress)
                queue.write(self.engine, self.plan, out)
                self.attempts += len(out)
                for r in out:
                    self.counts[r["status"]] += 1
        finally:
            self.released = queue.release_mine(self.engine, self.plan)


def how_rated(stats: dict) -> str:
    """The summary line's account of the work (``stats``: the verdict scorer's counters):
    "forward passes, no generation", or "forward passes; greedy decoding for N rows, M tokens"
    when rows needed decoding (the forward pass did not show their greedy text whole). Pure."""
    rows, toks = int(stats.get("generated_rows", 0)), int(stats.get("generated_tokens", 0))
    if not rows:
        return "forward passes, no generation"
    return f"forward passes; greedy decoding for {rows} row{'s' if rows != 1 else ''}, {toks} tokens"


def run(engine, plan, prompt: Prompt, *, folder: Path, prefix: str, device: str, dtype: str, scorer: Any = None,
        todo: int = 0, show: bool = True, render_time_limit_s: float) -> tuple[LocalRunner, Optional[str], float]:
    """Load the model (unless ``scorer`` is given), then rate the plan's pending rows under a
    progress bar; returns the runner, the name of the signal that interrupted the run (or
    None) and the seconds spent rating (model loading excluded, reported as ``load_s``)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(stderr=True)
    t_load = time.perf_counter()
    if scorer is None:
        from judgecal.loglik.verdicts import VerdictScorer

        if show:
            console.print(f"loading {folder} ({device}, {dtype})", highlight=False)
        scorer = VerdictScorer(folder, device=device, dtype=dtype)
    load_s = time.perf_counter() - t_load
    scorer.stats = {}  # this run's work only (a scorer given by the caller may have run before)
    runner = LocalRunner(engine, plan, prompt, scorer, prefix, render_time_limit_s)
    caught: list[str] = []

    def on_term(signum: int, frame: Any) -> None:
        caught.append(signal.Signals(signum).name)
        raise _Stopped()

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread
        previous = None
    bar = Progress(TextColumn("rating (forward)"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), console=console, disable=not show, transient=False)
    start = time.perf_counter()
    try:
        with bar:
            task = bar.add_task("rating", total=todo)
            runner.run(progress=(lambda n: bar.advance(task, n)) if show else None)
    except KeyboardInterrupt:
        caught.append("SIGINT")
    except _Stopped:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    elapsed = time.perf_counter() - start
    runner.local_summary = {"model": str(folder), "device": device, "dtype": dtype, "verdict_prefix": prefix,
                            "closing": scorer.continuations([""], prefix)[0],
                            "forward": getattr(scorer.scorer, "forward_name", None), "load_s": round(load_s, 3),
                            **scorer.stats}
    if show:
        c = runner.counts
        console.print(f"rated {sum(c.values())}: ok {c['ok']}, unparsed {c['unparsed']}, failed {c['failed']} "
                      f"({how_rated(scorer.stats)})", highlight=False)
    return runner, (caught[0] if caught else None), elapsed
