"""Terminal tables of ``judgecal mc``: metrics with diagnostics, run listing, run comparison."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text


def ties_line(ties: dict | None) -> str | None:
    """One line for the terminal: ``ties: 2 items decided by an exact tie (acc), 1 (acc_norm)``
    (metrics with a count only), ``ties: no prediction decided by an exact tie``, or None for
    a run stored before ties were counted (``ties``: diagnostics' counts per metric)."""
    if ties is None:
        return None
    hit = [(m, n) for m, n in ties.items() if n]
    if not hit:
        return "ties: no prediction decided by an exact tie"
    (m0, n0), rest = hit[0], hit[1:]
    head = f"ties: {n0} item{'s' if n0 != 1 else ''} decided by an exact tie ({m0})"
    return head + "".join(f", {n} ({m})" for m, n in rest) + "; the first tied choice is predicted, as in lm-eval"


def metrics_renderable(metrics: dict, diagnostics: dict) -> Group:
    """Metric table (headline first; acc_norm marked when a letter-key task drops it), the
    exact-tie line (:func:`ties_line`) and notes."""
    table = Table("metric", "value", "stderr", "n")
    headline = diagnostics.get("headline") or list(metrics)
    for name in headline + [k for k in metrics if k not in headline]:
        v = metrics[name]
        dim = "" if name in headline else " (not headline)"
        se = v["stderr"]
        table.add_row(name + dim, f"{v['value']:.4f}", "-" if se is None or se != se else f"{se:.4f}", str(v["n"]))
    parts: list = [table]
    gap = diagnostics.get("acc_norm_minus_acc")
    if gap is not None:
        parts.append(Text(f"acc_norm - acc: {gap:+.4f}"))
    ties = ties_line(diagnostics.get("ties"))
    if ties:
        parts.append(Text(ties))
    for note in diagnostics.get("notes", []):
        parts.append(Text(f"note: {note}"))
    if diagnostics.get("truncated_requests"):
        parts.append(Text(f"note: {diagnostics['truncated_requests']} continuations scored after a context cut on the "
                          "left to fit the model's positions (as lm-eval cuts them)"))
    if diagnostics.get("boundary_fixes"):
        parts.append(Text(f"note: {diagnostics['boundary_fixes']} continuations re-encoded (a token spanned the context boundary)"))
    return Group(*parts)


def run_setup(settings: dict) -> dict:
    """What sets a run's prompts apart beyond its task: ``shots`` (a number, "N-M" when tasks
    differ, "-" for a judgecal task file), ``chat`` ("chat", "chat multiturn", "-"), ``seed``
    (the few-shot seed, else "-") and ``limit``."""
    nf = settings.get("num_fewshot")
    if isinstance(nf, dict):
        vals = sorted({v for v in nf.values() if isinstance(v, int)})
        shots = f"{vals[0]}-{vals[-1]}" if len(vals) > 1 else (str(vals[0]) if vals else "-")
    else:
        shots = "-" if nf is None else str(nf)
    chat = "-"
    if settings.get("apply_chat_template"):
        chat = "chat multiturn" if settings.get("fewshot_as_multiturn") else "chat"
    if settings.get("system_instruction"):
        chat = ("system" if chat == "-" else chat + " + system")
    seed = settings.get("fewshot_seed")
    limit = settings.get("limit")
    return {"shots": shots, "chat": chat, "seed": "-" if seed is None else str(seed),
            "limit": "-" if limit is None else str(limit)}


def ties_cell(diagnostics: dict | None) -> str:
    """A run's exact ties for a table cell: ``acc/acc_norm`` counts (``2/0``), ``-`` for a
    run stored before ties were counted."""
    ties = (diagnostics or {}).get("ties")
    if ties is None:
        return "-"
    return "/".join(str(ties[m]) if m in ties else "-" for m in ("acc", "acc_norm"))


def runs_table(runs: list[dict]) -> Table:
    """Stored runs, newest first, with their few-shot count, chat-template setting, few-shot
    seed and limit (two runs of one task that differ in those are told apart), and the items
    whose acc / acc_norm prediction an exact tie decided (``ties``); ``bits/byte``: an lm-eval
    perplexity run's bits_per_byte (items: its documents)."""
    table = Table("id", "model", "task", "items", "shots", "chat", "seed", "limit", "acc", "acc_norm", "bits/byte",
                  "ties", "created")
    for r in runs:
        mt = r["metrics"]
        setup = run_setup(r.get("settings") or {})
        table.add_row(str(r["id"]), r["model"], r["task"], str(r["n_items"]), setup["shots"], setup["chat"],
                      setup["seed"], setup["limit"],
                      f"{mt['acc']['value']:.4f}" if "acc" in mt else "-",
                      f"{mt['acc_norm']['value']:.4f}" if "acc_norm" in mt else "-",
                      f"{mt['bits_per_byte']['value']:.4f}" if "bits_per_byte" in mt else "-",
                      ties_cell(r.get("diagnostics")), str(r["created_at"]))
    return table


def compare_renderable(cmp: dict, run_a: int, run_b: int) -> Group:
    """Deltas RUN_B - RUN_A per metric, the opposite-direction flag, and each run's exact ties
    when either has any."""
    table = Table("metric", f"run {run_a}", f"run {run_b}", "delta", "stderr")
    for name, d in cmp["deltas"].items():
        table.add_row(name, f"{d['a']:.4f}", f"{d['b']:.4f}", f"{d['delta']:+.4f}",
                      "-" if d["stderr"] is None else f"{d['stderr']:.4f}")
    parts: list = [table]
    if cmp["opposite_directions"]:
        parts.append(Text(f"acc and acc_norm moved in opposite directions: {cmp['message']}", style="bold yellow"))
    ties = cmp.get("ties") or {}
    if any(any((t or {}).values()) for t in ties.values()):
        for side, run in (("a", run_a), ("b", run_b)):
            line = ties_line(ties.get(side))
            parts.append(Text(f"run {run} " + (line or "ties: not counted (stored before ties were counted)")))
    return Group(*parts)
