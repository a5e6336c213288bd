"""Table of the pairwise-judge section of the report (pure formatting): position bias, agreement
with the experts by order shown, LLMBar's own figures and the judge comparison."""

from __future__ import annotations


COLUMNS = ["task family", "judge", "verdicts", "pairs in both orders", "consistent", "flip rate",
           "first-position preference", "agreement, a first", "agreement, b first", "agreement, both orders (tie)",
           "agreement, soft average", "LLMBar: average / both / equal", "rank: gap to best [95% CI]",
           "longer preferred (pairs)"]


def _f(x, ci=None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _agreement(e: dict, mode: str) -> str:
    ea = (e.get("expert_agreement") or {}).get(mode)
    if not ea or ea["agreement"] is None:
        return "-"
    return f"{_f(ea['agreement'], ea['ci'])} (n={ea['n']})"


def _llmbar(e: dict) -> str:
    lf = e.get("llmbar_figures")
    if not lf:
        return "-"
    def count(text):
        return text.split(" = ")[0].replace(" ", "")
    return f"{float(lf['correct_average'].rstrip('%')):.1f}% / {count(lf['correct_both'])} / {count(lf['equal'])}"


def _rank(e: dict) -> str:
    c = e.get("comparison")
    if not c:
        return "-"
    if c["rank"] == 1:
        return f"1 of {c['n_judges']}: best (n={c['n_pairs']})"
    ci = c["gap_to_best_ci"]
    gap = f"{100 * c['gap_to_best']:+.1f}" + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else "")
    return f"{c['rank']} of {c['n_judges']}: {gap} points"


def rows(section: list[dict]) -> list[list[str]]:
    """Table rows (strings) of the pairwise-judge section; shares to 3 decimals, 95% CIs in
    brackets; the gap to the family's best judge in agreement points (combined orders);
    LLMBar's figures as its statistics.json defines them (docs/report.md)."""
    out = []
    for e in section:
        out.append([e["task_family"], e["judge"], str(e["n_verdicts"]), str(e["n_pairs"]),
                    _f(e["consistent"], e["consistent_ci"]), _f(e["flip_rate"], e["flip_rate_ci"]),
                    _f(e["first_position_preference"], e["first_position_preference_ci"]),
                    _agreement(e, "ab"), _agreement(e, "ba"), _agreement(e, "combined"), _agreement(e, "soft"),
                    _llmbar(e), _rank(e), f"{_f(e['longer_preferred'])} ({e['n_length_pairs']})"])
    return out
