"""Table of the pairwise-judge section of the report (pure formatting)."""

from __future__ import annotations


COLUMNS = ["task family", "judge", "verdicts", "pairs in both orders", "consistent", "flip rate",
           "first-position preference", "longer preferred (pairs)"]


def rows(section: list[dict]) -> list[list[str]]:
    """Table rows (strings) of the pairwise-judge section; shares to 3 decimals, 95% CIs in brackets."""
    def f(x, ci=None):
        if x is None:
            return "-"
        return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

    out = []
    for e in section:
        out.append([e["task_family"], e["judge"], str(e["n_verdicts"]), str(e["n_pairs"]),
                    f(e["consistent"], e["consistent_ci"]), f(e["flip_rate"], e["flip_rate_ci"]),
                    f(e["first_position_preference"], e["first_position_preference_ci"]),
                    f"{f(e['longer_preferred'])} ({e['n_length_pairs']})"])
    return out
