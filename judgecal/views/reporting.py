"""``judgecal report``: stored calibrations (and, for families with concise/verbose pairs but no
calibration, the raw verbosity figures) -> report dict -> terminal table, JSON, Markdown or a
self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from judgecal.db.models import iso_utc
from judgecal.progress import no_step
from judgecal.db import models as m
from judgecal.db import queries as q
from judgecal.db import verdicts as vq
from judgecal.db.derived import stored
from judgecal.db.engine import get_engine, session_scope
from judgecal.errors import FitError, JudgecalError, NotFoundError, UsageError
from judgecal.views.fitting import STALE_TEXT, UNKNOWN_FRESHNESS_TEXT, evaluate_family, load_calibrations, staleness
from judgecal.report.build import build_report


def _entry(row: m.Calibration, family: str, judge: str, stale: bool | None = None) -> dict:
    evaluation = dict(row.metrics or {})
    evaluation["points"] = (row.data or {}).get("points")
    return {"task_family": family, "judge": judge, "calibration_id": row.id, "created_at": iso_utc(row.created_at),
            "length_unit": row.length_unit, "tokenizer": row.tokenizer, "evaluation": evaluation,
            "stale": stale, "fingerprint": (row.data or {}).get("fingerprint")}


def _unfitted_families(families, judge: str | None, have: set[tuple[str, str]], url: str | None) -> list[tuple[str, str]]:
    """(family, judge id) with verbosity pairs and ok ratings by the judge but no calibration, by
    family name, then judge name."""
    engine = get_engine(url)
    out = []
    with session_scope(engine) as s:
        fam_ids = q.family_ids(s, families)
        judge_ids = [q.judge_by_name(s, judge, lambda: q.judges_with_data(s, fam_ids), "with ratings or verdicts").id] if judge else None
        for fid in fam_ids:
            fam = s.get(m.TaskFamily, fid)
            has_pairs = s.scalar(select(m.VerbosityPair.id).join(m.Item, m.Item.id == m.VerbosityPair.item_id)
                                 .where(m.Item.task_family_id == fid).limit(1))
            if not has_pairs:
                continue
            stmt = (select(m.Judge.id, m.Judge.name).join(m.Rating, m.Rating.judge_id == m.Judge.id)
                    .join(m.Response, m.Response.id == m.Rating.response_id).join(m.Item, m.Item.id == m.Response.item_id)
                    .where(m.Item.task_family_id == fid, m.Rating.status == "ok").distinct())
            found = []
            for jid, jname in s.execute(stmt):
                if (judge_ids is None or jid in judge_ids) and (fam.name, jname) not in have:
                    found.append((jname, jid))
            out += [(fam.name, str(jid)) for _, jid in sorted(found)]  # by judge name: the same order in every database
    engine.dispose()
    return sorted(out, key=lambda t: t[0])


@stored("report_entries")
def collect_entries(families=None, judge: str | None = None, calibration="latest", url: str | None = None,
                    n_bootstrap: int = 1000, seed: int = 0, summary: str | None = None,
                    risk_k: float = 1.0) -> list[dict]:
    """Report entries.

    ``summary`` (None: each calibration as it was fitted): the rating summary asked for
    (:mod:`judgecal.calibrate.summaries`); a calibration fitted on another one is refused
    (UsageError), and the verbosity-only entries read that summary. Transfer entries read the
    summary their calibration was fitted on (:func:`judgecal.views.fitting.transfer_evaluation`).

    ``calibration`` "latest" (or an empty list): the newest calibration per (family, judge),
    then verbosity-only entries for families that have concise/verbose pairs rated by a judge
    without a calibration (words as length unit).

    One or more calibration ids: per id, its own entry when ``families`` is empty or names the
    calibration's own family, and a **transfer** entry (the calibration applied to that family's
    expert labels, :func:`judgecal.views.fitting.transfer_evaluation`) for every other family named in
    ``families``. A calibration is never silently reported for a family it was not asked for,
    and a requested family it cannot be applied to is an error, not an omission. A repeated id or
    family counts once (first occurrence order)."""
    ids = _calibration_ids(calibration)
    families = list(dict.fromkeys(families or []))
    if not ids or ids == ["latest"]:
        chosen = load_calibrations(families, judge, "latest", url)
        _refuse_summary(chosen, summary, risk_k)
        stale = staleness(chosen, url)
        entries = [_entry(row, fam, jname, stale[row.id]) for row, fam, jname in chosen]
        have = {(e["task_family"], e["judge"]) for e in entries}
        for fam, jid in _unfitted_families(families, judge, have, url):
            try:
                evaluation, ctx = evaluate_family(fam, jid, length_unit="words", n_bootstrap=n_bootstrap, seed=seed,
                                                  url=url, nested=False, summary=summary or "greedy", risk_k=risk_k)
            except FitError:
                continue
            entries.append({"task_family": fam, "judge": ctx["judge"], "calibration_id": None, "created_at": None,
                            "length_unit": "words", "tokenizer": None, "evaluation": evaluation,
                            "stale": False, "fingerprint": evaluation["data"].get("fingerprint")})
    else:
        from judgecal.views.fitting import transfer_evaluation

        from judgecal.views.fitting import refuse_out_of_scope

        entries = []
        chosen = load_calibrations(None, None, ids, url)
        refuse_out_of_scope(chosen, None, judge, url)  # --judge by name, model or id, as everywhere
        _refuse_summary(chosen, summary, risk_k)
        stale = staleness(chosen, url)
        for row, fam, jname in chosen:
            targets = list(families or [])
            if not targets or fam in targets:
                entries.append(_entry(row, fam, jname, stale[row.id]))
            for target in targets:
                if target == fam:
                    continue
                ev = transfer_evaluation(row, fam, jname, target, n_bootstrap=n_bootstrap, seed=seed, url=url)
                entries.append({"task_family": target, "judge": jname, "calibration_id": row.id,
                                "created_at": iso_utc(row.created_at), "length_unit": row.length_unit,
                                "tokenizer": row.tokenizer, "source_family": fam, "evaluation": ev,
                                "stale": stale[row.id], "fingerprint": (row.data or {}).get("fingerprint")})
    return entries


def _refuse_summary(chosen: list[tuple], summary: str | None, risk_k: float) -> None:
    """UsageError for a chosen calibration fitted on another summary than ``summary`` (None: any)."""
    if summary is None:
        return
    from judgecal.calibrate.summaries import check_summary
    from judgecal.views.fitting import refuse_summary_mismatch

    check_summary(summary, risk_k)
    for row, fam, _ in chosen:
        refuse_summary_mismatch(row, summary, risk_k, fam)


def collect_boards(families=None, judge: str | None = None, url: str | None = None, n_bootstrap: int = 1000,
                   seed: int = 0, step=None, summary: str | None = None, risk_k: float = 1.0,
                   calibration="latest") -> dict:
    """The leaderboards of the HTML report, built by the functions ``judgecal leaderboard`` and
    ``judgecal serve`` call: {"score": [:func:`judgecal.views.leaderboard.build_leaderboard`
    board per judge with ratings, each with its newest calibrations], "winrates":
    [:func:`judgecal.views.winrates.build_winrate_board` board per (task family, judge,
    baseline) with pairwise verdicts against a baseline], "notes": [one line per board that
    could not be built, saying why]}. ``families`` / ``judge``: the report's own filters (a
    judge by name, model or id, as everywhere); ``n_bootstrap`` / ``seed``: the boards' CIs;
    ``summary`` / ``risk_k``: the rating summary of both boards (None: greedy); ``calibration``:
    the report's own choice of entries: the score boards always apply each family's newest
    calibration, and a note says so when the report was given calibration ids."""
    from judgecal.views.browse import baselines, choices
    from judgecal.views.leaderboard import build_leaderboard
    from judgecal.views.winrates import build_winrate_board

    step = step or no_step
    families = list(dict.fromkeys(families or []))
    judge_id = None
    if judge is not None:
        engine = get_engine(url)
        with session_scope(engine) as s:
            judge_id = q.judge_by_name(s, judge, lambda: q.judges_with_data(s, q.family_ids(s, families)),
                                       "with ratings or verdicts").id
        engine.dispose()
    out: dict = {"score": [], "winrates": [], "notes": []}
    summary = summary or "greedy"
    if str(calibration) != "latest":
        out["notes"].append("the score boards apply each task family's newest calibration; the calibration ids given "
                            "to the report choose its entries above, not the boards")
    for j in choices(url)["judges"]:
        if not j["ratings"] or (judge_id is not None and j["id"] != judge_id):
            continue
        step(f"score leaderboard of judge {j['label']}")
        try:
            out["score"].append(build_leaderboard(families, j["ref"], "latest", url, n_bootstrap=n_bootstrap, seed=seed,
                                                 summary=summary, risk_k=risk_k))
        except JudgecalError as exc:
            out["notes"].append(f"score leaderboard of judge {j['label']}: not built: {str(exc).splitlines()[0]}")
    for b in baselines(url):
        if (families and b["task_family"] not in families) or (judge_id is not None and b["judge_id"] != judge_id):
            continue
        step(f"win rates against {b['model']} ({b['task_family']}, judge {b['judge']})")
        try:
            out["winrates"].append(build_winrate_board(b["model"], [b["task_family"]], b["judge_ref"], url,
                                                       n_bootstrap=n_bootstrap, seed=seed, summary=summary,
                                                       risk_k=risk_k))
        except JudgecalError as exc:
            out["notes"].append(f"win rates against {b['model']} ({b['task_family']}, judge {b['judge']}): not built: "
                                f"{str(exc).splitlines()[0]}")
    return out


def _with_freshness_warnings(entries: list[dict]) -> list[dict]:
    """The entries, each stale calibration's (and each one of unknown freshness) with that
    warning first among its evaluation's warnings, so that every format shows it."""
    out = []
    for e in entries:
        text = STALE_TEXT if e.get("stale") else UNKNOWN_FRESHNESS_TEXT if e.get("stale", False) is None else None
        if text is not None:
            ev = dict(e["evaluation"])
            ev["warnings"] = [text] + [w for w in (ev.get("warnings") or []) if w != text]
            e = {**e, "evaluation": ev}
        out.append(e)
    return out


def _calibration_ids(calibration) -> list[str]:
    """``calibration`` ("latest", an id, or a list of them) as a list of distinct strings, first
    occurrence order (a repeated id is reported once)."""
    ids = [calibration] if isinstance(calibration, (str, int)) else list(calibration or [])
    return list(dict.fromkeys(str(i) for i in ids))


def _calibration_scopes(calibration, families, url: str | None) -> set[tuple[str, int]] | None:
    """{(task family, judge id)} a report of calibration ids covers (each calibration's family, or
    the ``families`` it is transferred to); None for the newest calibrations (``"latest"``): the
    whole database (narrowed by ``families`` / ``judge`` alone)."""
    ids = _calibration_ids(calibration)
    if not ids or ids == ["latest"]:
        return None
    return {(target, row.judge_id) for row, fam, _ in load_calibrations(None, None, ids, url)
            for target in (families or [fam])}


def make_report(families=None, judge: str | None = None, calibration="latest", url: str | None = None,
                out_dir: Path | None = None, formats: tuple[str, ...] = (), plots: bool = True,
                n_bootstrap: int = 1000, seed: int = 0, length_position: bool = False,
                step=None, summary: str | None = None, risk_k: float = 1.0) -> tuple[dict, list[dict], dict]:
    """Build the report; write ``report.{json,md,html}`` for the requested ``formats`` into
    ``out_dir`` (created). ``calibration``: "latest" or a list of ids (:func:`collect_entries`);
    ``n_bootstrap``/``seed``: the resamples of figures computed at report time (transfer and
    verbosity-only entries); ``length_position``: the pairwise section's "length and position
    together" per judge (:func:`judgecal.views.pairwise_report.collect_pairwise`); where pairwise
    verdicts exist, ``report["bradley_terry"]``: the style-controlled Bradley-Terry boards
    (:func:`judgecal.views.bt_report.collect_bt`, ``n_bootstrap``/``seed``; a report of
    calibration ids: their families and judges only). The HTML page
    also shows the score and win-rate leaderboards (:func:`collect_boards`). Returns (report,
    entries, {format: path}). ``step(message)`` is called at each phase (:mod:`judgecal.progress`).
    ``summary``/``risk_k``: as :func:`collect_entries` (None: each calibration as fitted)."""
    step = step or no_step
    step("reading the calibrations and evaluating transfers")
    entries = collect_entries(families, judge, calibration, url, n_bootstrap=n_bootstrap, seed=seed, summary=summary,
                              risk_k=risk_k)
    report = build_report(_with_freshness_warnings(entries))
    fresh = {(str(e["task_family"]), str(e["judge"]), e.get("calibration_id")): e for e in entries}
    for out in report["entries"]:  # build_report may reorder the entries (a transfer that hurts first)
        entry = fresh.get((out["task_family"], out["judge"], out.get("calibration_id"))) or {}
        out["stale"] = entry.get("stale")
        out["fingerprint"] = entry.get("fingerprint")
    from judgecal.views.pairwise_report import collect_pairwise

    step("pairwise judges: position consistency" + (", length and position together" if length_position else ""))
    report["pairwise_judges"] = collect_pairwise(families, judge, url, n_bootstrap=n_bootstrap, seed=seed,
                                                 length_position=length_position)
    from judgecal.views.bt_report import collect_bt

    bt_section = collect_bt(families, judge, url, n_bootstrap=n_bootstrap, seed=seed, step=step,
                            pairs=_calibration_scopes(calibration, families, url))
    if bt_section is not None:  # only where pairwise verdicts exist
        report["bradley_terry"] = bt_section
    boards = None
    if out_dir is not None and "html" in formats:
        boards = collect_boards(families, judge, url, n_bootstrap=n_bootstrap, seed=seed, step=step, summary=summary,
                                risk_k=risk_k, calibration=calibration)
    if not entries and not report["pairwise_judges"] and not report.get("bradley_terry") and not (boards and (boards["score"] or boards["winrates"])):
        engine = get_engine(url)
        with session_scope(engine) as s:
            unusable = vq.unusable_verdicts(s)
        engine.dispose()
        stored = (" (stored, but none usable: " + ", ".join(f"{n} {status}" for status, n in sorted(unusable.items())) + ")"
                  if unusable else "")
        raise NotFoundError("nothing to report: no calibration, no rated concise/verbose pairs and no pairwise verdicts "
                            f"with a preference{stored} (run `judgecal fit`, or import / rate pairwise verdicts)")
    written = {}
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for fmt in formats:
            step(f"writing the {fmt} report" + (" and its plots" if fmt == "html" and plots else ""))
            path = out_dir / {"json": "report.json", "markdown": "report.md", "html": "report.html"}[fmt]
            path.write_text(render(report, entries, fmt, plots=plots, boards=boards), encoding="utf-8")
            written[fmt] = path
    return report, entries, written


def render(report: dict, entries: list[dict], fmt: str, plots: bool = True, boards: dict | None = None) -> str:
    """The report as text in ``fmt`` (json, markdown or html); ``boards``: the leaderboards the
    HTML page shows (:func:`collect_boards`; None: none)."""
    if fmt == "json":
        from judgecal.report.build import report_json

        return report_json(report)
    if fmt == "markdown":
        from judgecal.report.render_markdown import render_markdown

        return render_markdown(report)
    from judgecal.report.render_html import render_html

    return render_html(report, entries, plots=plots, boards=boards)


@stored("report_plots")
def report_plots(evaluation: dict, title: str, length_unit: str | None, url: str | None = None) -> tuple:
    """A report entry's two plots (:func:`judgecal.report.plots.plot_score_vs_length` and
    :func:`~judgecal.report.plots.plot_score_distributions` of its ``evaluation``) as base64 PNG
    text (None where a plot has no points). Keyed by every value they are drawn from, so ``db
    refresh`` can store them (matplotlib's import and drawing take longer than a page may);
    ``url`` only says where the stored copy is looked for."""
    import base64

    from judgecal.report.plots import plot_score_distributions, plot_score_vs_length

    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode("ascii")

    return (b64(plot_score_vs_length(evaluation, title=title, length_unit=length_unit)),
            b64(plot_score_distributions(evaluation, title=title)))

