"""The LLMBar repository layout, whole (../shared/data/llmbar_repo): every judge and protocol
imported (pairwise verdicts in both orders, ratings wherever the score dict sits), LLMBar's own
statistics.json reproduced figure for figure from what the database holds, the position-bias
section of the report. One import per module (about 4 s); every statistics.json is checked."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_report_position_section_all_six_judges(imported, run_cli):
    url, _ = imported
    r = run_cli("--database-url", url, "report", "--format", "json", "--bootstrap", "50")
    assert r.exit_code == 0, r
    sec = json.loads(r.stdout)["pairwise_judges"]
    assert {e["task_family"] for e in sec} == {"llmbar/Natural", "llmbar/Adversarial_Neighbor", "llmbar/Adversarial_GPTInst"}
    assert {e["judge"].split("/")[0] for e in sec} == set(JUDGES)
    assert len(sec) == 3 * 58  # every pairwise protocol of every judge, per set
    by = {(e["task_family"], e["judge"]): e for e in sec}
    e = by[("llmbar/Natural", "GPT-4/Vanilla")]
    # statistics.json of GPT-4/Vanilla on Natural: 95 / 96 correct, 93 both, 95 equal
    assert e["expert_agreement"]["ab"]["agreement"] == 0.95 and e["expert_agreement"]["ba"]["agreement"] == 0.96
    assert e["expert_agreement"]["combined"]["agreement"] == pytest.approx(0.955)
    assert e["consistent"] == 0.95 and e["llmbar_figures"]["correct_both"] == "93 / 100 = 93.0%"
    for fam in ("llmbar/Natural", "llmbar/Adversarial_Neighbor", "llmbar/Adversarial_GPTInst"):
        ranks = [x["comparison"]["rank"] for x in sec if x["task_family"] == fam]
        assert ranks == sorted(ranks) and ranks[0] == 1  # best first, then by rank
    r = run_cli("--database-url", url, "report", "--format", "markdown", "--bootstrap", "0")
    assert r.exit_code == 0 and "| llmbar/Natural | GPT-4/Vanilla |" in r.stdout and "agreement, b first" in r.stdout


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
    assert batch.skipped["protocol folder without result.json"] == [str(path.parent.parent / "CoT")]
    assert parity == []  # the excerpt has no statistics.json
    # a statistics.json of the excerpt that disagrees is a warning naming the figure
    stats = path.parent / "statistics.json"
    stats.write_text(json.dumps({"correct_both": "3 / 3 = 100.0%"}))
    batch = llmbar.parse_any(root, parity=parity)
    assert any(str(stats) in w and "correct_both" in w for w in batch.warnings), batch.warnings
    assert parity and parity[-1]["differences"]


@pytest.mark.postgres
def test_one_set_on_postgresql_parity_and_reimport(repo, pg_url):
    from judgecal.views import importing
    from judgecal.views.pairwise_report import repository_figures

    natural = repo / "Dataset" / "LLMBar" / "Natural"
    out = importing.import_llmbar(natural, url=pg_url)
    assert out["llmbar_statistics"]["equal"] == out["llmbar_statistics"]["compared"] == 65
    assert sum(importing.import_llmbar(natural, url=pg_url)["added"].values()) == 0
    for p in ("Swap_CoT", "Rating_Metrics_Reference"):
        theirs = json.loads((natural / "evaluators" / "GPT-4" / p / "statistics.json").read_text())
        assert llmbar_stats.compare(repository_figures("llmbar/Natural", llmbar.judge_name("GPT-4", p), pg_url),
                                    theirs) == []


def test_cohen_kappa_matches_the_repository_coding():
    # scikit-learn's cohen_kappa_score on the repository's codes: {0, 1} against labels {1, 2}
    assert llmbar_stats.cohen_kappa([1, 0, 1, 0], [1, 2, 1, 2]) == pytest.approx(1 / 3)
    assert llmbar_stats.cohen_kappa([1, 1, 2, 2], [1, 1, 2, 2]) == 1.0
    assert llmbar_stats.winners_from_scores("7", "7") == ("2", "1")  # a tie: one order each
    assert llmbar_stats.winners_from_scores("", "3") == ("1", "2")  # unreadable: int() fails
