"""The style-control section of docs/results.md (issue 34 item 5), collected and rendered for
benchmarks/results.py (which imports this file and calls :func:`collect` and :func:`render`).

(a) On the AlpacaEval annotations results.py imported (26 models, judge
weighted_alpaca_eval_gpt4_turbo, baseline gpt4_1106_preview): ``judgecal bt --control
length|markdown|both --format json`` (the style coefficients with CIs, the controlled board
beside the plain one) and ``judgecal stats --format json`` (the answers' style features of
gpt4_1106_preview and its concise/verbose variants). (b) On the LLMBar repository layout
results.py imported into its second database: :func:`judgecal.views.styleoos.style_oos_entries`
(style control against length-only out of sample, per judge and set; the measure is
:mod:`judgecal.calibrate.style_oos`). Every number shown comes from those outputs; this file
only formats them. Seeded and with a modest bootstrap (:data:`BOOTSTRAP`), so that the section
is deterministic and costs well under a minute."""

from __future__ import annotations

import sys
import time

DASH = "-"
CONTROLS = ("length", "markdown", "both")
BOOTSTRAP, SEED = 200, 0
LENGTH_UNIT = "words"
#: the pointwise judges' comparison uses the fits' own unit (SmolLM2 tokens)
POINTWISE_UNIT = "tokens"
FOLDS = 5
JUDGE = "weighted_alpaca_eval_gpt4_turbo"
FAMILY = "alpaca_eval"
VARIANTS = ("_concise", "_verbose")
OOS_CONTROLS = ("none", "length", "length+lists", "both")
#: what the document keeps of a board
BOARD_KEYS = ("n_battles", "n_items", "n_models", "n_bootstrap", "seed", "baseline", "judge", "control", "style",
              "rows", "set_apart", "notes")
ROW_KEYS = ("model", "rank", "rank_uncontrolled", "change", "win_rate", "win_rate_ci", "win_rate_uncontrolled",
            "win_rate_uncontrolled_ci", "rating", "flag_codes")


# ----------------------------------------------------------------------------- collecting
def collect(run, llmbar_repo_url: str, baseline: str, judges: list[str], log=sys.stderr) -> dict:
    """``run``: results.py's Runner on the database holding the AlpacaEval annotations and the
    gpt4_1106_preview pair files; ``llmbar_repo_url``: the database holding the LLMBar repository
    layout; ``judges``: the pairwise judges (name/protocol) of part (b)."""
    from judgecal.views.styleoos import pointwise_style_entries, style_oos_entries

    t0 = time.perf_counter()
    boards = {}
    for c in CONTROLS:
        b = run("bt", "--task-family", FAMILY, "--judge", JUDGE, "--baseline", baseline, "--control", c,
                "--length-unit", LENGTH_UNIT, "--bootstrap", BOOTSTRAP, "--seed", SEED, "--format", "json",
                json_out=True, show=False)
        b = {k: b.get(k) for k in BOARD_KEYS}
        b["rows"] = [{k: r.get(k) for k in ROW_KEYS} for r in b.get("rows") or []]
        boards[c] = b
    stats = run("stats", "--format", "json", json_out=True, show=False)
    family = next((f for f in stats if f.get("task_family") == FAMILY), {}) if isinstance(stats, list) else {}
    wanted = {baseline} | {baseline + v for v in VARIANTS}
    styles = [r for r in family.get("answer_style") or [] if r.get("model") in wanted]
    t1 = time.perf_counter()
    oos = style_oos_entries(judges=judges, url=llmbar_repo_url, length_unit=LENGTH_UNIT, folds=FOLDS, seed=SEED,
                            n_bootstrap=BOOTSTRAP)
    t2 = time.perf_counter()
    pointwise = pointwise_style_entries(url=run.url, length_unit=POINTWISE_UNIT, tokenizer="smollm2", folds=FOLDS,
                                        seed=SEED, n_bootstrap=BOOTSTRAP)
    t3 = time.perf_counter()
    print(f"results: style control: AlpacaEval boards {t1 - t0:.1f} s, LLMBar out of sample {t2 - t1:.1f} s, "
          f"pointwise judges {t3 - t2:.1f} s", file=log, flush=True)
    return {"boards": boards, "styles": styles, "oos": oos, "pointwise": pointwise, "baseline": baseline, "commands": [
        "# style control (issue 34 item 5), first database:",
        f"judgecal bt --task-family {FAMILY} --judge {JUDGE} --baseline {baseline} --control <length|markdown|both> "
        f"--length-unit {LENGTH_UNIT} --bootstrap {BOOTSTRAP} --seed {SEED}",
        "judgecal stats",
        f"# second database, no command yet: judgecal.views.styleoos.style_oos_entries(judges=<the {len(judges)} "
        f"judge/protocols of the length-position section>, length_unit=\"{LENGTH_UNIT}\", folds={FOLDS}, seed={SEED}, "
        f"n_bootstrap={BOOTSTRAP})",
        f"# first database, no command yet: judgecal.views.styleoos.pointwise_style_entries(length_unit=\"{POINTWISE_UNIT}\", "
        f"tokenizer=\"smollm2\", folds={FOLDS}, seed={SEED}, n_bootstrap={BOOTSTRAP})"]}


# ----------------------------------------------------------------------------- formatting
def num(x):
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v and abs(v) != float("inf") else None


def _ci(c):
    if isinstance(c, (list, tuple)) and len(c) == 2 and num(c[0]) is not None and num(c[1]) is not None:
        return num(c[0]), num(c[1])
    return None


def fmt(x, ci=None, digits: int = 3, sign: bool = False) -> str:
    v = num(x)
    if v is None:
        return DASH
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    c = _ci(ci)
    return f.format(v) + (f" [{f.format(c[0])}, {f.format(c[1])}]" if c else "")


def cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list], right: set[int] = frozenset()) -> list[str]:
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    return out + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]


def listing(items: list[str]) -> str:
    if not items:
        return "none"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _change(c) -> str:
    v = num(c)
    return DASH if v is None else ("0" if v == 0 else f"{int(v):+d}")


# ----------------------------------------------------------------------------- rendering
def render(res: dict | None, families: list[str], judges: list[str]) -> list[str]:
    """The section's Markdown lines (``families``, ``judges``: the order of part (b)'s rows)."""
    L = ["## Style control: Bradley-Terry boards with and without style (issue 34)", ""]
    if not res or not res.get("boards"):
        return L + ["Not collected.", ""]
    L += _alpaca(res)
    L += _variants(res)
    L += _oos(res.get("oos") or [], families, judges, res["boards"])
    L += _pointwise(res.get("pointwise") or [], families)
    return L


def _pointwise(entries: list[dict], families: list[str]) -> list[str]:
    L = ["### LLMBar pointwise judges: does the style candidate beat length-only out of sample?", ""]
    if not entries:
        return L + ["Not collected.", ""]
    fo = {f: i for i, f in enumerate(families)}
    entries = sorted(entries, key=lambda e: (fo.get(e.get("task_family"), 99), e.get("judge") or ""))
    L += ["The pointwise judges of the first table (GPT-4 and ChatGPT scoring each answer), on the pairs a fit uses. "
          "**The measure** (`judgecal.calibrate.lc_style_oos`; docs/calibration.md, \"lc_glm_style\"): AlpacaEval "
          "2.0's length-controlled GLM (`lc_glm`) and its style extension (`lc_glm_style`: the same GLM plus "
          "Arena-Hard-Auto's standardised header, list and bold density differences) are each refitted on 4 of 5 "
          "folds of items (the nested selection's outer folds) and predict the expert's choice on the fifth; the "
          "figure is the out-of-sample expert agreement (ties half), the gain the paired difference with its 95% CI "
          f"over item resamples ({BOOTSTRAP} resamples). Lengths in SmolLM2 {POINTWISE_UNIT}. The style "
          "coefficients (log-odds per sd, fitted on every pair) say how the judge's score and the expert's choice "
          "part ways on each feature: negative means the judge rewards it more than the experts do. "
          "`lc_glm_style` is also a candidate of every pointwise fit's nested selection (the first table's "
          "\"recommended\" column).", ""]
    rows, beats, worse = [], [], []
    for e in entries:
        fam = (e.get("task_family") or DASH).split("/", 1)[-1]
        fig = {k: (e.get(k) or {}).get("figure") for k in ("raw", "lc_glm", "lc_glm_style")}
        fit = e.get("fit") or {}
        gam = fit.get("gamma") or {}
        coefs = ", ".join(f"{k} {fmt(v, sign=True, digits=2)}" + (" (at bound)" if k in (fit.get("at_bound") or []) else "")
                          for k, v in gam.items()) or DASH
        if fit.get("left_out"):
            coefs += "; left out (constant): " + ", ".join(fit["left_out"])
        verdict = e.get("verdict") or DASH
        if verdict == "style beats length-only":
            beats.append(f"{fam} / {e.get('judge')}")
        elif verdict == "worse than length-only":
            worse.append(f"{fam} / {e.get('judge')}")
        rows.append([fam, e.get("judge", DASH), e.get("n_pairs", DASH),
                     " / ".join(fmt(fig[k]) for k in ("raw", "lc_glm", "lc_glm_style")),
                     DASH if e.get("gain") is None else fmt(100 * e["gain"], [100 * x for x in e["gain_ci"]] if e.get(
                         "gain_ci") else None, digits=1, sign=True), coefs, verdict])
    L += table(["set", "judge", "pairs", "agreement out of sample: raw / lc_glm / lc_glm_style",
                "style over length-only (points)", "style coefficients (log-odds per sd)", "verdict"], rows,
               right={2, 3, 4})
    L.append("")
    L.append(f"- **Answer:** the style candidate beats length-only out of sample in {len(beats)} of {len(entries)} "
             "judge/set cells" + (f" ({listing(beats)})" if beats else "") + "; worse (CI below zero) in "
             f"{len(worse)}" + (f" ({listing(worse)})" if worse else "") + ". "
             + ("Keep length-only for LLMBar's pointwise judges: " if len(beats) <= len(entries) / 10 else "")
             + "LLMBar's answers carry little Markdown (the counts in the section above), so the extra "
               "coefficients have little to learn from.")
    L.append("")
    return L


def _alpaca(res: dict) -> list[str]:
    boards = res["boards"]
    any_b = next(iter(boards.values()))
    L = [f"AlpacaEval's real annotations (judge `{any_b.get('judge', DASH)}`, every model against "
         f"`{any_b.get('baseline', DASH)}`: {any_b.get('n_models', DASH)} models, {num(any_b.get('n_battles')) or 0:,.0f} "
         f"verdicts on {any_b.get('n_items', DASH)} instructions), `judgecal bt --control length|markdown|both`: the "
         "Bradley-Terry fit with Arena-Hard-Auto's style covariates (the length difference over the sum, the "
         "header, list-item and bold densities' normalised differences, standardised), the soft preference as "
         f"credit, lengths and densities in {LENGTH_UNIT}, 95% percentile CIs of {any_b.get('n_bootstrap', DASH)} item "
         f"resamples (seed {any_b.get('seed', DASH)}). Definitions: docs/style.md.", "",
         "### The judge's style coefficients", "",
         "How much the judge rewards each feature: log-odds per standard deviation of the standardised feature "
         "difference (a minus b) and the odds ratio exp(coef), under each control.", ""]
    rows = []
    for c in CONTROLS:
        st = (boards.get(c) or {}).get("style") or {}
        for co in st.get("coefficients") or []:
            rows.append([c, co.get("feature", DASH), fmt(co.get("coef"), co.get("coef_ci"), sign=True),
                         fmt(co.get("odds_ratio"), co.get("odds_ratio_ci"), digits=2), fmt(co.get("raw_sd"), digits=4)])
        for left in st.get("left_out") or []:
            rows.append([c, left, "left out: constant over the battles", DASH, DASH])
    L += table(["control", "feature", "coef [95% CI]", "odds ratio [95% CI]", "raw sd"], rows, right={2, 3, 4})
    L.append("")
    # the boards side by side, in the plain board's order
    by = {c: {r["model"]: r for r in (boards.get(c) or {}).get("rows") or []} for c in CONTROLS}
    plain = sorted(by[CONTROLS[0]].values(), key=lambda r: (num(r.get("rank_uncontrolled")) or 1e9, r["model"]))
    L += ["### Controlled and uncontrolled boards", "",
          "Win rate against the baseline (%, derived from the ratings as Arena-Hard-Auto's show_result.py does) "
          "with its 95% CI; rank among the ranked models; the change is the uncontrolled rank minus the "
          "controlled one (positive: moved up under control).", ""]
    rows = []
    for r in plain:
        row = [r["model"], f"{r.get('rank_uncontrolled', DASH)}",
               fmt(r.get("win_rate_uncontrolled"), r.get("win_rate_uncontrolled_ci"), digits=1)]
        flags = set()
        for c in CONTROLS:
            x = by[c].get(r["model"]) or {}
            row.append(f"{x.get('rank', DASH)} ({_change(x.get('change'))})")
            row.append(fmt(x.get("win_rate"), x.get("win_rate_ci"), digits=1))
            flags |= set(x.get("flag_codes") or [])
        rows.append(row + [", ".join(sorted(flags)) or DASH])
    heads = ["model", "rank", "win rate"]
    for c in CONTROLS:
        heads += [f"{c}: rank (change)", f"{c}: win rate"]
    L += table(heads + ["flags"], rows, right=set(range(1, 2 + 2 * len(CONTROLS) + 1)))
    L.append("")
    apart = (boards.get(CONTROLS[-1]) or {}).get("set_apart") or []
    if apart:
        L.append("Set apart on every board (not ranked; their battles stay in the fit): "
                 + "; ".join(f"{a.get('model')} ({', '.join(a.get('codes') or [])})" for a in apart) + ".")
    moved = []
    for c in CONTROLS:
        ups = sorted(((num(x.get("change")) or 0, m) for m, x in by[c].items() if (num(x.get("change")) or 0) != 0),
                     key=lambda t: (-abs(t[0]), t[1]))
        moved.append(f"under {c}, {len(ups)} of {len(by[c])} ranked models change rank"
                     + (f" (most: {', '.join(f'{m} {int(d):+d}' for d, m in ups[:3])})" if ups else ""))
    L.append("Rank changes: " + "; ".join(moved) + ".")
    notes = []
    for c in CONTROLS:
        for n in (boards.get(c) or {}).get("notes") or []:
            if "set apart for degenerate answers" not in n and n not in notes:
                notes.append(n)
    if notes:
        L.append("Notes of the boards: " + " ".join(notes))
    L.append("")
    return L


def _variants(res: dict) -> list[str]:
    base = res.get("baseline") or DASH
    boards = res["boards"]
    any_b = next(iter(boards.values()))
    seen = set()
    for b in boards.values():
        seen |= {r["model"] for r in b.get("rows") or []} | {a.get("model") for a in b.get("set_apart") or []}
    names = [base + v for v in VARIANTS]
    on = [n for n in names if n in seen]
    L = [f"### The concise and verbose variants of {base}", ""]
    if len(on) < len(names):
        L.append(f"{listing([f'`{n}`' for n in names if n not in on])} "
                 f"{'is' if len(names) - len(on) == 1 else 'are'} not on any board: the data hold no verdict of this "
                 f"judge on them. `import alpaca-eval {base}.json --pair <concise> <verbose>` stores their answers and "
                 f"the verbosity pairs (same instruction, concise and verbose answer), not pairwise verdicts, and the "
                 f"AlpacaEval annotations compare each of the {any_b.get('n_models', DASH)} models with {base} itself. A "
                 "Bradley-Terry board "
                 "ranks only models that verdicts link to the baseline, so where these variants would land, "
                 "controlled or not, cannot be said from these data (it would take a judge's verdicts on them: "
                 "`judgecal rate --pairwise`). What can be shown: their answers' style beside the baseline's "
                 "(`judgecal stats`), and below, the verbosity variants that do have verdicts.")
    L.append("")
    rows = []
    for s in sorted(res.get("styles") or [], key=lambda r: r.get("model", "")):
        f = s.get("features") or {}

        def mean(k):
            return fmt((f.get(k) or {}).get("mean"), digits=2)
        rows.append([s.get("model", DASH), s.get("answers", DASH), fmt((f.get("n_words") or {}).get("mean"), digits=0),
                     fmt((f.get("n_words") or {}).get("median"), digits=0), mean("md_headers"), mean("md_list_ordered"),
                     mean("md_list_unordered"), mean("md_bold")])
    if rows:
        L += table(["model", "answers", "mean words", "median words", "headers / answer", "ordered items / answer",
                    "unordered items / answer", "bold / answer"], rows, right=set(range(1, 8)))
        L.append("")
    fams: dict[str, list[str]] = {}
    plain = {r["model"]: r for r in (boards.get(CONTROLS[0]) or {}).get("rows") or []}
    for m in plain:
        stem = next((m[: -len(v)] for v in VARIANTS if m.endswith(v)), None)
        if stem is not None:
            fams.setdefault(stem, [])
    for stem in fams:
        fams[stem] = [m for m in (stem, stem + VARIANTS[0], stem + VARIANTS[1]) if m in plain]
    if fams:
        by = {c: {r["model"]: r for r in (boards.get(c) or {}).get("rows") or []} for c in CONTROLS}
        rows = []
        for stem in sorted(fams):
            for m in fams[stem]:
                r = plain[m]
                row = [m, f"{r.get('rank_uncontrolled', DASH)}", fmt(r.get("win_rate_uncontrolled"), digits=1)]
                for c in CONTROLS:
                    x = by[c].get(m) or {}
                    row += [f"{x.get('rank', DASH)} ({_change(x.get('change'))})", fmt(x.get("win_rate"), digits=1)]
                rows.append(row)
        heads = ["model", "rank", "win rate"]
        for c in CONTROLS:
            heads += [f"{c}: rank (change)", f"{c}: win rate"]
        L += ["The verbosity variants on the board (the same model prompted normally, to be concise, to be verbose; "
              "win rate against the baseline in %, from the board above):", ""]
        L += table(heads, rows, right=set(range(1, 3 + 2 * len(CONTROLS))))
        L.append("")
    return L


def _oos(entries: list[dict], families: list[str], judges: list[str], boards: dict) -> list[str]:
    L = ["### LLMBar: does style control beat length-only out of sample?", ""]
    if not entries:
        return L + ["Not collected.", ""]
    fo = {f: i for i, f in enumerate(families)}
    jo = {j: i for i, j in enumerate(judges)}
    entries = sorted(entries, key=lambda e: (fo.get(e.get("task_family"), 99), jo.get(e.get("judge"), 99),
                                             e.get("judge") or ""))
    L += ["On the LLMBar repository layout (the six judges' pairwise verdicts in both orders, expert labels), per "
          "set and judge/protocol. **The measure** (`judgecal.calibrate.style_oos`; docs/style.md, \"Out of "
          "sample\"): every usable verdict on a pair is one battle, oriented so that its first answer is the "
          "expert's; the Bradley-Terry model of the boards with two players (the expert's answer, the other) and "
          "Arena-Hard-Auto's standardised style differences as covariates, P(expert's answer preferred) = "
          "expit(theta + z . gamma), is fitted on 4 of 5 folds of items and predicts the verdicts of the fifth; the "
          "figure is the mean held-out log-likelihood per verdict (nats, higher is better) under no covariate, "
          "length only, length + list density, and all four (Arena-Hard-Auto's `both`). A gain is the paired "
          "difference on the same verdicts with its 95% CI over item resamples "
          f"({BOOTSTRAP} resamples, seed {SEED + 1}; folds seed {SEED}); a control beats length-only when that CI "
          f"lies above zero, otherwise keep length-only. Lengths and densities in {LENGTH_UNIT}. \"n.i.\": not "
          "identified -- some training fold has no finite maximum-likelihood fit (a feature present in a handful of "
          "answers whose battles all went one way: separation), so the control cannot be fitted on this set at all.", ""]
    prev = {}
    for e in entries:
        a = e.get("answers") or {}
        prev.setdefault(e.get("task_family"), a)
    L.append("How much Markdown there is to control for (distinct answers of the pairs with at least one header / "
             "list item / bold span): " + "; ".join(
                 f"{f.split('/', 1)[-1]}: {a.get('headers', DASH)} / {a.get('lists', DASH)} / {a.get('bold', DASH)} "
                 f"of {a.get('n', DASH)}" for f, a in prev.items()) + ".")
    L.append("")
    rows = []
    tally: dict[str, dict[str, list[str]]] = {}
    for e in entries:
        fam = (e.get("task_family") or DASH).split("/", 1)[-1]
        t = tally.setdefault(fam, {"rows": [], "length": [], "lists": [], "both": [], "both_ni": [], "lists_worse": [],
                                   "both_worse": []})
        t["rows"].append(e.get("judge"))
        ll = e.get("loglik") or {}

        def gain(key):
            g = e.get(key)
            return "n.i." if g is None else fmt(g.get("gain"), g.get("gain_ci"), sign=True)

        def below(key):
            c = _ci((e.get(key) or {}).get("gain_ci"))
            return bool(c and c[1] < 0)

        if (e.get("length_vs_none") or {}).get("above"):
            t["length"].append(e.get("judge"))
        if e.get("lists_beat_length_only"):
            t["lists"].append(e.get("judge"))
        if e.get("beats_length_only"):
            t["both"].append(e.get("judge"))
        if e.get("both_vs_length") is None:
            t["both_ni"].append(e.get("judge"))
        if below("lists_vs_length"):
            t["lists_worse"].append(e.get("judge"))
        if below("both_vs_length"):
            t["both_worse"].append(e.get("judge"))
        better = [n for n, k in (("length + lists", "lists_beat_length_only"), ("both", "beats_length_only")) if e.get(k)]
        verdict = (listing(better) + " beats length-only") if better else "keep length-only"
        rows.append([fam, e.get("judge", DASH), e.get("n_battles", DASH),
                     " / ".join(fmt(ll.get(c)) if ll.get(c) is not None else "n.i." for c in OOS_CONTROLS),
                     gain("length_vs_none"), gain("lists_vs_length"), gain("both_vs_length"), verdict])
    L += table(["set", "judge/protocol", "verdicts", "held-out log-lik per verdict: none / length / length+lists / both",
                "length over none", "length+lists over length", "both over length", "verdict"], rows,
               right={2, 3, 4, 5, 6})
    L.append("")

    def per(key):
        return "; ".join(f"{f} {len(t[key])} of {len(t['rows'])}" + (f" ({listing(t[key])})" if 0 < len(t[key]) <= 4
                                                                       else "") for f, t in tally.items())

    L.append(f"- **Style control (`both`) beats length-only** (CI above zero): {per('both')}. Not identified: "
             f"{per('both_ni')}. Worse than length-only (CI below zero): {per('both_worse')}.")
    L.append(f"- **Length + list density beats length-only**: {per('lists')}. Worse (CI below zero): {per('lists_worse')}.")
    L.append(f"- **Length control itself beats no control**: {per('length')}.")
    n_rows = sum(len(t["rows"]) for t in tally.values())
    better = sorted({f"{f} {j}" for f, t in tally.items() for j in t["both"] + t["lists"]})
    n_ni = sum(len(t["both_ni"]) for t in tally.values())
    n_worse = sum(len(set(t["both_worse"]) | set(t["lists_worse"])) for t in tally.values())
    bold = next((c for c in ((((boards.get("both") or {}).get("style") or {}).get("coefficients")) or [])
                 if c.get("feature") == "bold"), None)
    L.append(f"- **Answer:** a Markdown control beats length-only out of sample in {len(better)} of {n_rows} rows"
             + (f" ({listing(better)})" if 0 < len(better) <= 4 else "")
             + (": keep length-only on LLMBar. " if len(better) <= n_rows / 10 else ". ")
             + f"Headers and bold are rare in LLMBar's answers (the counts above), so the full control is not "
               f"identified in {n_ni} of {n_rows} rows; where it is, or where the list density alone is added, the "
               "held-out verdicts are mostly predicted no better than by length alone (worse, CI below zero, in "
               f"{n_worse} rows: the extra coefficients fit noise)."
             + (f" AlpacaEval's answers carry far more Markdown, and there this judge's bold coefficient under `both` is "
                f"{fmt(bold.get('coef'), bold.get('coef_ci'), sign=True)} log-odds per sd; those verdicts have no expert "
                "label to test a correction against, so whether removing that reward brings the board closer to "
                "human judgement is not shown by these data." if bold else ""))
    L.append("")
    return L
