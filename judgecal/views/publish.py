"""``judgecal publish``: the board a team publishes from.

One board per task family and judge that applies the advice instead of leaving it to the
reader: the column the evidence backs is the published one ("recommended", the default), raw
where the advice is keep raw (:func:`judgecal.views.check.published_column`: the gate checks
exactly that column), with the advice and its evidence in one line. Models whose answers are
empty, constant, truncated or far below the family's length, the baseline itself and the gamed
baselines (``X_verbose``, ``X_concise``) are set apart with their reason, not ranked among the
others. Ranks are competition ranks on the published values as shown
(:func:`judgecal.calibrate.ranking.shown_ranks`); ties in content order (model name).

Score boards come from :func:`judgecal.views.leaderboard.build_leaderboard` (one family at a
time), win-rate boards (``baseline``) from :func:`judgecal.views.winrates.build_winrate_board`:
every published figure is the one those boards print for the same options."""

from __future__ import annotations

from judgecal.calibrate.guards import NO_GAIN_CODES, SHORT_CODES
from judgecal.calibrate.ranking import SCORE_DECIMALS, WIN_RATE_DECIMALS, shown_ranks
from judgecal.errors import NotFoundError, UsageError
from judgecal.views.check import PUBLISH_MODES, advice_line, published_column

#: ``--publish`` of a win-rate board: raw (AlpacaEval's win_rate), lc (AlpacaEval 2.0's
#: length_controlled_winrate), calibrated (judgecal's penalty fitted on the judge's verdicts)
WINRATE_PUBLISH_MODES = ("recommended", "raw", "lc", "calibrated")
#: flag codes (the boards' short codes) that set a model apart from the ranked rows: answers that
#: are empty, one answer to most items, or truncated (:data:`judgecal.calibrate.guards.NO_GAIN_CODES`),
#: the gamed baselines and the baseline itself. Far-short answers stay ranked (flagged): short is
#: not degenerate, it only caps a calibration's credit.
APART_CODES = frozenset(SHORT_CODES[c] for c in NO_GAIN_CODES) | {"gamed", "baseline"}
#: flag codes that concern one column only: shown on a publish board only where that column is published
_COLUMN_CODES = {"calibrated": {"bound", "unident", "keep-raw", "advice", "uncal", "transfer", "cal-unidentified",
                                "far-short"},
                 "lc": {"lc-unidentified"}}
_WIN_COLUMN = {"raw": ("win_rate", "win_rate_ci"), "lc": ("length_controlled_winrate", "length_controlled_winrate_ci"),
               "calibrated": ("calibrated_win_rate", "calibrated_win_rate_ci")}


def build_publish(families=None, judge: str | None = None, url: str | None = None, *, publish: str = "recommended",
                  baseline: str | None = None, n_bootstrap: int = 1000, seed: int = 0, min_ratings: int = 30,
                  max_unparsed: float = 0.05) -> dict:
    """{"publish": mode, "baseline": None | model, "boards": [board, ...]}; each board:
    {"kind": "score" | "winrate", "task_family", "judge", "judge_ref" (what ``--judge`` and a URL
    name it by: its name, or ``id:N`` where judges share the name), "calibration" (id or None),
    "published": column published ("raw", "calibrated", "lc"), "published_key" (the source
    board's key of that column), "advice" (one line: what is published and the evidence),
    "rows": [{"model", "rank", "score", "score_ci", "raw", "raw_ci", "calibrated",
    "calibrated_ci", "lc", "n", "mean_length", "flags" (codes), "flag_messages"}],
    "flag_legend": {code: meaning}, "set_apart": [{"model", "score", "raw", "reason"}], "notes"}.

    Score boards (no ``baseline``): one per (family, judge) with a calibration among
    ``families`` and ``judge`` (all when not given); a family given whose judge has ratings
    but no calibration publishes raw and says so. Win-rate boards (``baseline``): one, for the
    judge and family that the data implies or that are given.

    Raises UsageError (a mode not in :data:`PUBLISH_MODES` / :data:`WINRATE_PUBLISH_MODES`, or
    a choice the data leaves open: ChoiceError), NotFoundError (nothing to publish)."""
    if baseline is not None:
        if publish not in WINRATE_PUBLISH_MODES:
            raise UsageError(f"--publish must be one of {', '.join(WINRATE_PUBLISH_MODES)} with --baseline, got {publish!r}")
        if families and len(families) > 1:
            from judgecal.db import queries
            from judgecal.db.engine import get_engine, session_scope

            with session_scope(get_engine(url)) as s:
                queries.one_family(s, list(families), "a win-rate board (--baseline)")
        return {"publish": publish, "baseline": baseline,
                "boards": [_winrate_board(baseline, list(families or []), judge, url, publish, n_bootstrap, seed)]}
    if publish not in PUBLISH_MODES:
        raise UsageError(f"--publish must be one of {', '.join(PUBLISH_MODES)}, got {publish!r}")
    from judgecal.views.fitting import fit_row, load_calibrations

    fams = list(dict.fromkeys(families or []))
    chosen = load_calibrations(fams or None, judge, "latest", url)
    boards = []
    have = set()
    for row, fam, jud in chosen:
        have.add(fam)
        boards.append(_score_board(fam, f"id:{row.judge_id}", jud, fit_row(row, fam, jud), url, publish,
                                   n_bootstrap, seed, min_ratings, max_unparsed))
    for fam in fams:
        if fam not in have:  # rated, never fitted: raw is what there is to publish
            boards.append(_score_board(fam, judge, None, None, url, publish, n_bootstrap, seed, min_ratings,
                                       max_unparsed))
    if not boards:
        raise NotFoundError("nothing to publish: no calibration stored (run `judgecal fit`, or name a --task-family "
                            "to publish its raw scores)")
    boards.sort(key=lambda b: (b["task_family"], b["judge"]))
    return {"publish": publish, "baseline": None, "boards": boards}


def _score_board(fam: str, judge_ref: str | None, judge_name: str | None, fit: dict | None, url, publish: str,
                 n_bootstrap: int, seed: int, min_ratings: int, max_unparsed: float) -> dict:
    from judgecal.views.leaderboard import build_leaderboard

    board = build_leaderboard([fam], judge_ref, "latest", url, min_ratings=min_ratings, max_unparsed=max_unparsed,
                              n_bootstrap=n_bootstrap, seed=seed)
    if fit is None:
        if publish == "calibrated":
            raise UsageError(f"--publish calibrated: {fam} has no calibration of judge {board['judge']!r} "
                             f"(run `judgecal fit --task-family {fam}`)")
        column, advice = "raw", (f"raw: no calibration of judge {board['judge']!r} in {fam} is stored, so none was "
                                 f"weighed against raw (judgecal fit --task-family {fam} weighs them out of sample)")
    else:
        column, advice = published_column(fit, publish), advice_line(fit, publish)
        if column == "calibrated" and not board["calibrations"].get(fam):
            column = "raw"
    key = "mean_calibrated" if column == "calibrated" else "mean_raw"
    ranked, apart = [], []
    for r in board["rows"]:
        codes = set(r.get("flag_codes") or [])
        why = [f for f, c in zip(r.get("flags") or [], r.get("flag_codes") or []) if c in APART_CODES | {"few"}]
        row = {"model": r["model"], "score": r[key], "score_ci": r[f"{key}_ci"], "raw": r["mean_raw"],
               "raw_ci": r["mean_raw_ci"], "calibrated": r["mean_calibrated"], "calibrated_ci": r["mean_calibrated_ci"],
               "lc": None, "n": r["n_rated"], "mean_length": r["mean_length"], "length_unit": r.get("length_unit"),
               **dict(zip(("flags", "flag_messages"), _shown_flags(r, column)))}
        if r[key] is None or codes & (APART_CODES | {"few"}):
            apart.append({"model": r["model"], "score": r[key], "raw": r["mean_raw"],
                          "reason": "; ".join(why) or "no published value"})
        else:
            ranked.append(row)
    _rank(ranked, SCORE_DECIMALS)
    return {"kind": "score", "task_family": fam, "judge": board["judge"], "judge_ref": board["judge_ref"],
            "calibration": (fit or {}).get("id"), "published": column, "published_key": key, "advice": advice,
            "rows": ranked, "flag_legend": _legend(ranked, board), "set_apart": sorted(apart, key=lambda a: a["model"]),
            "notes": list(board.get("notes") or [])}


def _winrate_board(baseline: str, families: list[str], judge: str | None, url, publish: str, n_bootstrap: int,
                   seed: int) -> dict:
    from judgecal.views.winrates import build_winrate_board

    board = build_winrate_board(baseline, families, judge, url, n_bootstrap=n_bootstrap, seed=seed)
    column = "raw" if publish == "recommended" else publish
    key, ci_key = _WIN_COLUMN[column]
    advice = {
        "recommended": "raw win rate, as advised: keep raw: no expert labels in this family, so no out-of-sample "
                       "evidence that a length correction improves this judge; AlpacaEval 2.0's length-controlled "
                       "win rate is shown beside it for comparison (--publish lc publishes it)",
        "raw": "raw win rate (--publish raw)",
        "lc": "AlpacaEval 2.0's length-controlled win rate (--publish lc: the peer's convention, not backed by "
              "out-of-sample evidence in judgecal)",
        "calibrated": "calibrated win rate (--publish calibrated: not backed by out-of-sample evidence in judgecal)",
    }[publish]
    ranked, apart = [], []
    for r in board["rows"]:
        codes = set(r.get("flag_codes") or [])
        flags = list(r.get("flags") or [])
        row = {"model": r["model"], "score": r[key], "score_ci": r[ci_key], "raw": r["win_rate"],
               "raw_ci": r["win_rate_ci"], "calibrated": r["calibrated_win_rate"],
               "calibrated_ci": r["calibrated_win_rate_ci"], "lc": r["length_controlled_winrate"],
               "n": r["n_total"], "mean_length": r["avg_length"], "length_unit": "chars",
               **dict(zip(("flags", "flag_messages"), _shown_flags(r, column)))}
        gamed = r["model"] in (baseline + "_verbose", baseline + "_concise")
        if r[key] is None or codes & APART_CODES or gamed:
            why = [f for f, c in zip(flags, r.get("flag_codes") or []) if c in APART_CODES]
            if gamed and "gamed" not in codes:
                why.append("gamed baseline (the baseline's own answers made verbose or concise)")
            apart.append({"model": r["model"], "score": r[key], "raw": r["win_rate"],
                          "reason": "; ".join(why) or "no published value"})
        else:
            ranked.append(row)
    _rank(ranked, WIN_RATE_DECIMALS)
    return {"kind": "winrate", "task_family": board["task_family"], "judge": board["judge"],
            "judge_ref": board["judge_ref"], "baseline": baseline,
            "calibration": None, "published": column, "published_key": key, "advice": advice, "rows": ranked,
            "flag_legend": _legend(ranked, board), "set_apart": sorted(apart, key=lambda a: a["model"]),
            "notes": list(board.get("notes") or [])}


def _shown_flags(r: dict, column: str) -> tuple[list[str], list[str]]:
    """(codes, messages) of the row's flags that concern what is published: rank changes and
    the flags of a column that is not published (a calibration's bounds, identification and
    short-answer credit where raw is published) are left out."""
    hidden = set().union(*(codes for col, codes in _COLUMN_CODES.items() if col != column))
    kept = [(c, f) for f, c in zip(r.get("flags") or [], r.get("flag_codes") or [])
            if not c.startswith("rank") and c not in hidden]
    return [c for c, _ in kept], [f for _, f in kept]


def _legend(rows: list[dict], board: dict) -> dict[str, str]:
    """{code: meaning} of the flag codes shown (the source board's legend where it has one,
    else the first message with that code), in order of first appearance."""
    known = board.get("flag_legend") or {}
    out: dict[str, str] = {}
    for r in rows:
        for c, msg in zip(r["flags"], r["flag_messages"]):
            out.setdefault(c, known.get(c, msg))
    return out


def _rank(rows: list[dict], decimals: int) -> None:
    """Sort ``rows`` by published value (descending), ties by model name; competition ranks
    on the values as shown (``decimals``)."""
    rows.sort(key=lambda r: (-r["score"], r["model"]))
    for r, k in zip(rows, shown_ranks([r["score"] for r in rows], decimals)):
        r["rank"] = k
