"""A judge's page (:func:`judgecal.views.judge.judge_profile`) as terminal tables."""

from __future__ import annotations

from judgecal.report.tables import Col, board_table


def _f(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ci(ci) -> str:
    return "-" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _mm(f) -> str:
    return "-" if not f or f["mean"] is None else f"{f['mean']:.1f} / {f['median']:g}"


def judge_tables(prof: dict, width: int = 120) -> list:
    """Lines (str) and rich Tables, in order, that fit ``width`` characters."""
    j = prof["judge"]
    items: list = [f"judge {j['label']}: {j['identity']}"]
    for e in prof["families"]:
        items.append("")
        items.append(f"{e['task_family']} ({e['kind']}): ratings "
                     + (", ".join(f"{k} {v}" for k, v in e["ratings"].items()) or "-") + "; verdicts "
                     + (", ".join(f"{k} {v}" for k, v in e["verdicts"].items()) or "-")
                     + f"; expert-labelled pairs decided {e['n_labelled']}, agreement {_f(e['agreement'])}")
        pz = e["position"]
        if pz:
            items.append(f"  position ({pz['n_pairs']} pairs in both orders): consistent {_f(pz['consistent'])} "
                         f"{_ci(pz['consistent_ci'])}, flip rate {_f(pz['flip_rate'])} {_ci(pz['flip_rate_ci'])}, "
                         f"first-position preference {_f(pz['first_position_preference'])} "
                         f"{_ci(pz['first_position_preference_ci'])}")
        lb = e["longer_by_ratio"]
        if lb:
            cols = [Col("length ratio", "bin", 0, "text"), Col("pairs", "n", 0), Col("judge longer", "j", 0),
                    Col("experts longer", "e", 0), Col("excess", "x", 0), Col("95% CI", "ci", 1)]
            cells = [[("all" if b is lb["overall"] else f"{b['lo']:.2f}-" + ("" if b["hi"] is None else f"{b['hi']:.2f}")),
                      str(b["n"]), _f(b["judge_longer"]), _f(b["experts_longer"]), _f(b["excess"]), _ci(b["excess_ci"])]
                     for b in lb["bins"] + [lb["overall"]]]
            table, notes = board_table(f"{e['task_family']}: prefers the longer answer? (characters)", cols, cells, width)
            items += [table] + notes
        c = e["comparison"]
        if c and c["rows"]:
            cols = [Col("rank", "rank", 0), Col("judge", "judge", 0, "name"), Col("kind", "kind", 1, "text"),
                    Col("agreement", "a", 0), Col("gap to best", "g", 0), Col("paired 95% CI", "ci", 1)]
            cells = [[str(r["rank"]), ("> " if r["this"] else "") + r["judge"], r["kind"], _f(r["agreement"]),
                      _f(r["gap_to_best"]), _ci(r.get("gap_to_best_ci"))] for r in c["rows"]]
            table, notes = board_table(f"{e['task_family']}: {c['n_judges']} judges on the {c['n_pairs']} labelled pairs "
                                       f"all decided (> this judge)", cols, cells, width)
            items += [table] + notes
        style = e.get("answer_style") or []
        if style:
            feats = ["n_chars", "n_words", "md_headers", "md_list_ordered", "md_list_unordered", "md_bold"]
            heads = ["chars", "words", "headers", "ordered items", "unordered items", "bold"]
            cols = [Col("model", "model", 0, "name"), Col("answers", "n", 1)] + [Col(h, k, 0) for h, k in zip(heads, feats)]
            cells = [[r["model"], str(r["answers"])] + [_mm(r["features"].get(k)) for k in feats] for r in style]
            table, notes = board_table(f"{e['task_family']}: answer style per model, mean / median (Markdown counts "
                                       "outside code blocks, docs/style.md)", cols, cells, width)
            items += [table] + notes
        for f in e["calibrations"]:
            ident = "" if f["identified"] in (None, True) else " NOT IDENTIFIED, do not publish: " + "; ".join(f["reasons"])
            items.append(f"  calibration {f['id']} ({f['created_at']}, {f['length_unit']}): advice "
                         f"{f['decision'] or '-'}{': ' + str(f['recommended']) if f['decision'] == 'calibrate' else ''}{ident}")
    return items
