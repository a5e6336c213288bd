"""The LLMBar repository layout, whole (../shared/data/llmbar_repo): every judge and protocol
imported (pairwise verdicts in both orders, ratings wherever the score dict sits), LLMBar's own
statistics.json reproduced figure for figure from what the database holds, the position-bias
section of the report. One import per module (about 4 s); every statistics.json is checked."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from judgecal.calibrate import llmbar_stats
from judgecal.importers import llmbar

SETS = ("Natural", "Adversarial/Neighbor", "Adversarial/GPTInst")
JUDGES = ("ChatGPT", "ChatGPT-0301", "Falcon", "GPT-4", "LLaMA2", "PaLM2")


def _statistics_files(root: Path) -> list[Path]:
    return sorted(root.glob("Dataset/LLMBar/**/evaluators/*/*/statistics.json"))


@pytest.fixture(scope="module")
def imported(repo, tmp_path_factory):
    """(database URL, import result) of the whole layout imported once from its root."""
    from judgecal.views import importing

    url = f"sqlite:///{tmp_path_factory.mktemp('llmbar_repo') / 'repo.db'}"
    return url, importing.import_llmbar(repo, url=url)


def test_whole_layout_imports(repo, imported):
    _, out = imported
    files = _statistics_files(repo)
    assert len(files) == 195
    added = out["added"]
    # 3 sets: 100 + 134 + 92 pairs, two responses and one expert label each
    assert added["item"] == 326 and added["response"] == 652 and added["expert_label"] == 326
    # computed from the files: two verdicts (both orders) per pair and pairwise protocol,
    # two ratings per pair and Rating protocol
    n_verdicts = n_ratings = 0
    for f in files:
        n = len(json.loads((f.parent / "result.json").read_text()))
        if llmbar.is_rating_protocol(f.parent.name):
            n_ratings += 2 * n
        else:
            n_verdicts += 2 * n
    assert added["pairwise_judgment"] == n_verdicts == 37816 and added["rating"] == n_ratings == 4564
    assert out["warnings"] == []
    assert out["llmbar_statistics"] == {"compared": 195, "equal": 195, "differ": []}
    # what was left out is counted and named: auxiliary outputs and Swap first stages
    swap = [k for k in out["skipped"] if k.startswith("LLMBar Swap:")]
    assert swap and out["skipped"][swap[0]]["where"][0].endswith(".json:146") or out["skipped"][swap[0]]["where"]
    assert sum(v["count"] for k, v in out["skipped"].items() if "auxiliary" in k) == 1956 * 3 + 326 * 3


def test_every_statistics_json_reproduced_from_the_database(repo, imported):
    """Parity: for every judge x protocol x set, the figures recomputed from the stored verdicts
    (or ratings) equal statistics.json as printed (kappas to 1e-9)."""
    from judgecal.db import positions as pq
    from judgecal.db import queries as q
    from judgecal.db.engine import get_engine, session_scope
    from judgecal.views.pairwise_report import repository_figures_of_ratings, repository_figures_of_verdicts

    url, _ = imported
    engine = get_engine(url)
    checked = 0
    with session_scope(engine) as s:
        for f in _statistics_files(repo):
            protocol, judge = f.parent.name, f.parent.parent.name
            fam = llmbar.set_name(f.parents[3])
            fid, j = q.family_id(s, fam), q.judge_by_name(s, llmbar.judge_name(judge, protocol))
            if llmbar.is_rating_protocol(protocol):
                ours = repository_figures_of_ratings(pq.labelled_rating_pairs(s, fid, j.id))
            else:
                ours = repository_figures_of_verdicts(pq.labelled_verdict_pairs(s, fid, j.id))
            theirs = json.loads(f.read_text())
            assert set(theirs) == set(llmbar_stats.KEYS), f
            assert llmbar_stats.compare(ours, theirs) == [], f
            checked += 1
    engine.dispose()
    assert checked == 195


def test_reimport_adds_nothing_and_shared_layout_is_the_same_data(repo, data_dir, imported):
    from judgecal.views import importing

    url, _ = imported
    again = importing.import_llmbar(repo / "Dataset" / "LLMBar", url=url)
    assert sum(again["added"].values()) == 0
    # the shared layout's GPT-4 / ChatGPT ratings and gold labels are the repository's own
    for name in ("Natural", "Adversarial_Neighbor", "Adversarial_GPTInst"):
        shared = importing.import_llmbar(data_dir / "llmbar" / name, url=url)
        assert sum(shared["added"].values()) == 0, (name, shared["added"])


FAMILIES = {"llmbar/Natural": "Natural", "llmbar/Adversarial_Neighbor": "Adversarial/Neighbor",
            "llmbar/Adversarial_GPTInst": "Adversarial/GPTInst"}
POSITION_TITLE = "position consistency and length preference"
COMPARISON_TITLE = "judge comparison"


def _raw_credits(set_dir: Path) -> dict[str, np.ndarray]:
    """Straight from a set's result.json files, for every pairwise judge/protocol: each pair's
    agreement credit with the expert label from both orders combined (the mean of the orders'
    0/1 correctness, a tie 1/2 when they disagree; one order where the other's winner is null;
    NaN where both are), pairs in dataset.json order (LLMBar's ``label`` is 1 or 2)."""
    labels = [int(r["label"]) for r in json.loads((set_dir / "dataset.json").read_text())]
    out = {}
    for f in sorted(set_dir.glob("evaluators/*/*/result.json")):
        protocol, judge = f.parent.name, f.parent.parent.name
        if llmbar.is_rating_protocol(protocol):
            continue
        records = json.loads(f.read_text())
        assert [int(r["label"]) for r in records] == labels, f
        credit = []
        for r, label in zip(records, labels):
            final = r["results"][-1]  # the verdict (a Swap protocol's synthesis stage where there is one)
            got = [float(int(final[k]["winner"]) == label) for k in ("swap = False", "swap = True")
                   if final[k]["winner"] is not None]
            credit.append(np.mean(got) if got else np.nan)
        out[llmbar.judge_name(judge, protocol)] = np.array(credit)
    return out


def _raw_comparison(set_dir: Path) -> dict:
    """The judge comparison computed here, independently of judgecal, from the raw verdicts: on
    the pairs every judge/protocol judged, each one's agreement, rank (equal agreements share one; the best is the name first)
    and paired differences to the best."""
    credits = _raw_credits(set_dir)
    names = sorted(credits)
    C = np.vstack([credits[n] for n in names])
    C = C[:, np.all(np.isfinite(C), axis=0)]
    means = C.mean(axis=1)
    order = sorted(range(len(names)), key=lambda i: (-means[i], names[i]))
    best = order[0]
    return {"n_pairs": C.shape[1], "best": names[best],
            "rank": {names[i]: 1 + int(np.sum(means > means[i] + 1e-12)) for i in order},  # competition ranks
            "agreement": dict(zip(names, means)), "diff": {n: C[i] - C[best] for i, n in enumerate(names)},
            "credit": dict(zip(names, C))}


def _f(x, ci=None) -> str:
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _pts(x, ci) -> str:
    return f"{100 * x:+.1f} [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def _terminal_tables(text: str) -> dict[str, list[dict]]:
    """The rich tables of a terminal report: {title: rows as {header: cell}}, each header and
    cell joined across the lines it wraps over (a row starts where the first cell is not empty
    and the line before closed the previous row's first cell: here the first cells never wrap)."""
    tables, title_lines, headers, rows, body = {}, [], None, None, False
    for line in text.splitlines():
        if line.startswith("┏"):
            headers, rows, body = [], [], False
            continue
        if line.startswith("┡"):
            body = True
            continue
        if line.startswith("└"):
            tables[" ".join(title_lines)] = [dict(zip(headers, (" ".join(c) for c in r))) for r in rows]
            title_lines, headers, rows = [], None, None
            continue
        if headers is None:
            title_lines = title_lines + [line.strip()] if line.strip() else []
            continue
        cells = [c.strip() for c in line.strip().strip("│┃").split("│" if body else "┃")]
        if not body:
            headers = cells if not headers else [f"{h} {c}".strip() for h, c in zip(headers, cells)]
            continue
        if cells[0]:
            rows.append([[c] if c else [] for c in cells])
        else:
            for frag, c in zip(rows[-1], cells):
                if c:
                    frag.append(c)
    return tables


class _HtmlTables(HTMLParser):
    """{h2 / h3 text: rows as {header: cell}} of an HTML page (the table under each heading)."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[dict]] = {}
        self.title = self.cell = self.row = None
        self.in_h2 = self.in_head = False
        self.head: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3"):
            self.in_h2, self.title = True, ""
        elif tag == "thead":
            self.in_head, self.head = True, []
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("h2", "h3"):
            self.in_h2 = False
            self.tables[self.title] = []
        elif tag == "thead":
            self.in_head = False
        elif tag in ("td", "th") and self.row is not None:
            self.row.append(self.cell.replace("\u00ad", ""))  # the headers' soft hyphens (line-break hints)
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if self.in_head:
                self.head = self.row
            elif self.title is not None:
                self.tables[self.title].append(dict(zip(self.head, self.row)))
            self.row = None

    def handle_data(self, data):
        if self.in_h2:
            self.title += data
        elif self.cell is not None:
            self.cell += data


def _markdown_tables(text: str) -> dict[str, list[dict]]:
    """{## heading: rows as {header: cell}} of a Markdown report (the first table under each;
    cells split at " | ": no cell of these tables holds one)."""
    tables, title, headers = {}, None, None
    for line in text.splitlines():
        if line.startswith("## "):
            title, headers = line[3:], None
            tables[title] = []
        elif line.startswith("|") and title is not None:
            # md_table escapes Markdown's punctuation (\\[, \\-): the text as a reader sees it
            cells = [re.sub(r"\\(.)", r"\1", c.strip()) for c in line.strip().strip("|").split(" | ")]
            if headers is None:
                headers = cells
            elif not set(line) <= set("|-: "):
                tables[title].append(dict(zip(headers, cells)))
        elif not line.strip() and headers is not None:
            headers, title = None, None
    return tables


def _check_rendered(sec: list[dict], position: dict[str, list[dict]], comparison: dict[str, list[dict]]) -> None:
    """A rendered position table and judge comparison table ({family: rows as {header: cell}})
    show, for every judge of every family, what the report's JSON holds: consistency, flip rate
    and first-position preference with their CIs, agreement a first / b first / both orders /
    soft average, the rank, the gap to the best with its paired CI and the best named."""
    for fam in FAMILIES:
        entries = {e["judge"]: e for e in sec if e["task_family"] == fam}
        pos = {r["judge"]: r for r in position[fam]}
        cmp_ = {r["judge"]: r for r in comparison[fam]}
        assert set(pos) == set(cmp_) == set(entries) and len(entries) == 58, fam
        assert {j.split("/")[0] for j in pos} == set(JUDGES)
        for judge, e in entries.items():
            row, c = pos[judge], e["comparison"]
            assert row["consistent"] == _f(e["consistent"], e["consistent_ci"]), (fam, judge)
            assert row["flip rate"] == _f(e["flip_rate"], e["flip_rate_ci"])
            assert row["first-position preference"] == _f(e["first_position_preference"], e["first_position_preference_ci"])
            for mode, header in (("ab", "agreement, a first"), ("ba", "agreement, b first"),
                                 ("combined", "agreement, both orders (tie)"), ("soft", "agreement, soft average")):
                a = e["expert_agreement"][mode]
                assert row[header] == f"{_f(a['agreement'], a['ci'])} (n={a['n']})", (fam, judge, mode)
            assert row["rank"] == f"{c['rank']} of 58"
            crow = cmp_[judge]
            assert crow["rank"] == f"{c['rank']} of 58" and crow["best judge of the family"] == c["best"]
            assert crow["agreement, both orders (pairs compared)"] == f"{c['agreement']:.3f} (n={c['n_pairs']})"
            if judge == c["best"]:
                assert crow["gap to best, points [paired 95% CI]"] == "0 (the best)"
            else:
                assert crow["gap to best, points [paired 95% CI]"] == _pts(c["gap_to_best"], c["gap_to_best_ci"])
                lo, hi = c["gap_to_best_ci"]
                assert crow["below the best?"] == ("yes: CI below 0" if hi < 0 else "no: CI includes 0")


def test_report_position_section_all_six_judges(repo, imported, run_cli, tmp_path):
    """The report's pairwise section on the whole layout, in all four formats from one run: every
    judge x protocol of every set with position bias and agreement by order (CIs), and the judge
    comparison, checked against a comparison computed here from the raw result.json files."""
    url, _ = imported
    out = tmp_path / "report"
    r = run_cli("--database-url", url, "report", "--out", out, "--bootstrap", "500", "--seed", "0")
    assert r.exit_code == 0 and "Traceback" not in r.output, r
    sec = json.loads((out / "report.json").read_text())["pairwise_judges"]
    assert {e["task_family"] for e in sec} == set(FAMILIES)
    assert {e["judge"].split("/")[0] for e in sec} == set(JUDGES)
    assert len(sec) == 3 * 58  # every pairwise protocol of every judge, per set
    keys = {"n_verdicts", "n_pairs", "consistent", "consistent_ci", "flip_rate", "flip_rate_ci",
            "first_position_preference", "first_position_preference_ci", "expert_agreement", "kappa",
            "llmbar_figures", "comparison", "longer_preferred", "n_length_pairs"}
    for e in sec:
        assert keys <= set(e), keys - set(e)
        for k in ("consistent", "flip_rate", "first_position_preference"):
            lo, hi = e[f"{k}_ci"]
            assert lo <= e[k] <= hi, (e["judge"], k)
        assert set(e["expert_agreement"]) == {"ab", "ba", "combined", "soft"}
        assert set(e["comparison"]) == {"agreement", "rank", "gap_to_best", "gap_to_best_ci", "n_pairs", "best",
                                        "n_judges"}
    by = {(e["task_family"], e["judge"]): e for e in sec}
    e = by[("llmbar/Natural", "GPT-4/Vanilla")]
    # statistics.json of GPT-4/Vanilla on Natural: 95 / 96 correct, 93 both, 95 equal
    assert e["expert_agreement"]["ab"]["agreement"] == 0.95 and e["expert_agreement"]["ba"]["agreement"] == 0.96
    assert e["expert_agreement"]["combined"]["agreement"] == pytest.approx(0.955)
    assert e["consistent"] == 0.95 and e["llmbar_figures"]["correct_both"] == "93 / 100 = 93.0%"
    for fam in FAMILIES:
        ranks = [x["comparison"]["rank"] for x in sec if x["task_family"] == fam]
        assert ranks == sorted(ranks) and ranks[0] == 1  # best first, then by rank
        agree = [x["comparison"]["agreement"] for x in sec if x["task_family"] == fam]
        for k in range(1, len(ranks)):  # competition ranks: equal agreements share one, the next skips
            assert ranks[k] == (ranks[k - 1] if abs(agree[k] - agree[k - 1]) <= 1e-12 else k + 1), (fam, k)

    # the judge comparison against one computed here from the raw verdicts, on Adversarial_Neighbor
    raw = _raw_comparison(repo / "Dataset" / "LLMBar" / "Adversarial" / "Neighbor")
    assert raw["n_pairs"] == 133 and raw["best"] == "GPT-4/Metrics_Reference"
    for judge in raw["rank"]:
        c = by[("llmbar/Adversarial_Neighbor", judge)]["comparison"]
        assert (c["rank"], c["best"], c["n_pairs"]) == (raw["rank"][judge], raw["best"], 133), judge
        assert c["agreement"] == pytest.approx(raw["agreement"][judge], abs=1e-12)
        assert c["gap_to_best"] == pytest.approx(raw["diff"][judge].mean(), abs=1e-12)
    assert raw["agreement"]["GPT-4/Metrics_Reference"] == pytest.approx(114.5 / 133)
    # an independent paired item bootstrap (other resamples, 4000 of them) gives the same CIs to
    # within Monte Carlo error; an unpaired one would be wider
    rng = np.random.default_rng(12345)
    idx = rng.integers(0, 133, (4000, 133))
    for judge, gap, below in (("ChatGPT/Vanilla", -88.5 / 133, True), ("GPT-4/Metrics", -3 / 133, False)):
        c = by[("llmbar/Adversarial_Neighbor", judge)]["comparison"]
        assert c["gap_to_best"] == pytest.approx(gap, abs=1e-12)
        lo, hi = c["gap_to_best_ci"]
        ours = np.percentile(raw["diff"][judge][idx].mean(axis=1), [2.5, 97.5])
        assert lo == pytest.approx(ours[0], abs=0.015) and hi == pytest.approx(ours[1], abs=0.015), (judge, lo, hi, ours)
        assert lo < gap < hi and (hi < 0) == below and (ours[1] < 0) == below
        unpaired = np.percentile(raw["credit"][judge][idx].mean(axis=1)
                                 - raw["credit"][raw["best"]][rng.integers(0, 133, (4000, 133))].mean(axis=1), [2.5, 97.5])
        assert unpaired[1] - unpaired[0] > hi - lo

    # every format shows it: terminal table (one table per family), Markdown, HTML
    term = _terminal_tables(r.stdout)
    fam_of = {f"pairwise judges: {what}: {fam}": (what, fam) for fam in FAMILIES
              for what in (POSITION_TITLE, "judge comparison (agreement with the experts, paired CIs against the best)")}
    position = {fam: rows for t, rows in term.items() if t in fam_of and fam_of[t][0] == POSITION_TITLE
                for fam in [fam_of[t][1]]}
    comparison = {fam: rows for t, rows in term.items() if t in fam_of and fam_of[t][0] != POSITION_TITLE
                  for fam in [fam_of[t][1]]}
    assert set(position) == set(comparison) == set(FAMILIES), list(term)
    _check_rendered(sec, position, comparison)
    assert {r_["below the best?"] for r_ in comparison["llmbar/Adversarial_Neighbor"]
            if r_["judge"] in ("ChatGPT/Vanilla", "GPT-4/Metrics")} == {"yes: CI below 0", "no: CI includes 0"}
    for tables in (_markdown_tables((out / "report.md").read_text()), _parse_html((out / "report.html").read_text())):
        pos_rows = tables[f"Pairwise judges: {POSITION_TITLE}"]
        cmp_rows = tables[f"Pairwise judges: {COMPARISON_TITLE}"]
        assert len(pos_rows) == len(cmp_rows) == 3 * 58
        _check_rendered(sec, {f: [x for x in pos_rows if x["task family"] == f] for f in FAMILIES},
                        {f: [x for x in cmp_rows if x["task family"] == f] for f in FAMILIES})


def test_serve_calibration_page_shows_the_position_and_comparison_tables(imported):
    """judgecal serve's calibration page of a pairwise judge shows the report's two pairwise
    tables (GPT-4/Vanilla on Natural: 95 of 100 pairs consistent; alone, it is its own best)."""
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from judgecal.web import create_app

    r = TestClient(create_app(imported[0])).get("/calibration", params={"family": "llmbar/Natural",
                                                                        "judge": "GPT-4/Vanilla", "bootstrap": "50"})
    assert r.status_code == 200, r.text
    tables = _parse_html(r.text)
    (row,) = tables["Pairwise judges"]
    row = {k: v.replace("[", " [", 1) if v[:1].isdigit() and " [" not in v else v for k, v in row.items()}  # CI under the figure
    assert row["judge"] == "GPT-4/Vanilla" and row["consistent"].startswith("0.950 [") and row["rank"] == "1 of 1"
    assert row["agreement, b first"].startswith("0.960 [") and row["agreement, soft average"].startswith("0.955 [")
    (best,) = tables["Judge comparison"]
    assert (best["rank"], best["agreement, both orders (pairs compared)"], best["gap to best, points [paired 95% CI]"],
            best["best judge of the family"]) == ("1 of 1", "0.955 (n=100)", "0 (the best)", "GPT-4/Vanilla")


def _parse_html(text: str) -> dict[str, list[dict]]:
    p = _HtmlTables()
    p.feed(text)
    return p.tables


# ---- a small excerpt of the real repository (first records of Natural), for bad shapes

def _excerpt(repo: Path, dest: Path, n: int = 3, protocols=("GPT-4/Vanilla", "GPT-4/Swap", "GPT-4/Rating_Metrics")) -> Path:
    src = repo / "Dataset" / "LLMBar" / "Natural"
    out = dest / "Dataset" / "LLMBar" / "Natural"
    out.mkdir(parents=True)
    (out / "dataset.json").write_text(json.dumps(json.loads((src / "dataset.json").read_text())[:n], indent=2))
    for p in protocols:
        d = out / "evaluators" / p
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(json.loads((src / "evaluators" / p / "result.json").read_text())[:n],
                                                  indent=2))
    return dest


def _line_of(path: Path, k: int) -> int:
    return dict(enumerate(line for line, _ in llmbar.read_json_array(path)))[k]


@pytest.mark.parametrize("protocol,break_it,message", [
    ("GPT-4/Vanilla", lambda r: r["results"][-1].pop("swap = True"), "'swap = False' and 'swap = True'"),
    ("GPT-4/Vanilla", lambda r: r["results"][-1]["swap = False"].update(winner="3"), "must be \"1\", \"2\" or null"),
    ("GPT-4/Swap", lambda r: r["results"][-1]["swap = True"].update(completion="text"), "[completion text, finish reason]"),
    ("GPT-4/Rating_Metrics", lambda r: r["results"].append(["x", "stop"]), "score_1 and score_2"),
    ("GPT-4/Rating_Metrics", lambda r: r.update(results=[]), "non-empty list"),
    ("GPT-4/Vanilla", lambda r: r.update(label=1 if r["label"] == 2 else 2), "differs from dataset.json"),
])
def test_unknown_shapes_are_file_line_errors_and_nothing_is_written(repo, tmp_path, run_cli, protocol, break_it, message):
    root = _excerpt(repo, tmp_path / "repo")
    path = root / "Dataset" / "LLMBar" / "Natural" / "evaluators" / protocol / "result.json"
    records = json.loads(path.read_text())
    break_it(records[1])
    path.write_text(json.dumps(records, indent=2))
    url = f"sqlite:///{tmp_path / 'x.db'}"
    r = run_cli("--database-url", url, "import", "llmbar", root)
    assert r.exit_code == 2 and "Traceback" not in r.output, r
    assert f"{path}:{_line_of(path, 1)}:" in r.stderr and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    import sqlite3

    db = tmp_path / "x.db"
    if db.exists():  # the import is one transaction: nothing of the good files either
        with sqlite3.connect(db) as c:
            tables = {t for (t,) in c.execute("select name from sqlite_master where type = 'table'")}
            for t in {"item", "response", "expert_label", "rating", "pairwise_judgment"} & tables:
                assert c.execute(f"select count(*) from {t}").fetchone()[0] == 0, t


def test_excerpt_null_winner_is_unparsed_and_missing_result_is_named(repo, tmp_path):
    root = _excerpt(repo, tmp_path / "repo")
    path = root / "Dataset" / "LLMBar" / "Natural" / "evaluators" / "GPT-4" / "Vanilla" / "result.json"
    records = json.loads(path.read_text())
    records[0]["results"][-1]["swap = True"]["winner"] = None
    path.write_text(json.dumps(records, indent=2))
    (path.parent.parent / "CoT").mkdir()  # a protocol folder without result.json
    parity: list = []
    batch = llmbar.parse_any(root, parity=parity)
    bad = [v for v in batch.verdicts if v.status == "unparsed"]
    assert len(bad) == 1 and bad[0].position == "ba" and bad[0].raw_output and "winner is null" in bad[0].error
    assert batch.not_read["protocol folder without result.json"] == [str(path.parent.parent / "CoT")]
    assert parity == []  # the excerpt has no statistics.json
    # a statistics.json of the excerpt that disagrees is a warning naming the figure
    stats = path.parent / "statistics.json"
    stats.write_text(json.dumps({"correct_both": "3 / 3 = 100.0%"}))
    batch = llmbar.parse_any(root, parity=parity)
    assert any(str(stats) in w and "correct_both" in w for w in batch.warnings), batch.warnings
    assert parity and parity[-1]["differences"]


@pytest.mark.postgres
def test_one_set_on_postgresql_parity_and_reimport(repo, pg_url, imported):
    from judgecal.views import importing
    from judgecal.views.pairwise_report import collect_pairwise, repository_figures

    natural = repo / "Dataset" / "LLMBar" / "Natural"
    out = importing.import_llmbar(natural, url=pg_url)
    assert out["llmbar_statistics"]["equal"] == out["llmbar_statistics"]["compared"] == 65
    assert sum(importing.import_llmbar(natural, url=pg_url)["added"].values()) == 0
    for p in ("Swap_CoT", "Rating_Metrics_Reference"):
        theirs = json.loads((natural / "evaluators" / "GPT-4" / p / "statistics.json").read_text())
        assert llmbar_stats.compare(repository_figures("llmbar/Natural", llmbar.judge_name("GPT-4", p), pg_url),
                                    theirs) == []
    # the judge comparison on PostgreSQL: the raw verdicts' figures, and the same CIs as on SQLite
    sec = collect_pairwise(url=pg_url, n_bootstrap=200)
    raw = _raw_comparison(natural)
    assert raw["n_pairs"] == 97 and raw["best"] == "GPT-4/Metrics_Reference" and len(sec) == 58
    for e in sec:
        c = e["comparison"]
        assert (c["rank"], c["best"], c["n_pairs"]) == (raw["rank"][e["judge"]], raw["best"], 97), e["judge"]
        assert c["gap_to_best"] == pytest.approx(raw["diff"][e["judge"]].mean(), abs=1e-12)
    on_sqlite = {e["judge"]: e for e in collect_pairwise(["llmbar/Natural"], url=imported[0], n_bootstrap=200)}
    assert len(on_sqlite) == 58
    for e in sec:
        s_ = on_sqlite[e["judge"]]
        assert e["comparison"] == s_["comparison"] and e["consistent_ci"] == s_["consistent_ci"], e["judge"]
        assert e["first_position_preference_ci"] == s_["first_position_preference_ci"]
        assert e["expert_agreement"] == s_["expert_agreement"]


def test_cohen_kappa_matches_the_repository_coding():
    # scikit-learn's cohen_kappa_score on the repository's codes: {0, 1} against labels {1, 2}
    assert llmbar_stats.cohen_kappa([1, 0, 1, 0], [1, 2, 1, 2]) == pytest.approx(1 / 3)
    assert llmbar_stats.cohen_kappa([1, 1, 2, 2], [1, 1, 2, 2]) == 1.0
    assert llmbar_stats.winners_from_scores("7", "7") == ("2", "1")  # a tie: one order each
    assert llmbar_stats.winners_from_scores("", "3") == ("1", "2")  # unreadable: int() fails
