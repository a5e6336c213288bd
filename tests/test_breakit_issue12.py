"""Defects a break-it pass found in the issue-12 features: a calibration id of another family or
judge (leaderboard, export, check), the donor of --calibration-from, the nested selection's
bounds, the JudgeBench and LLMBar importers, overflowing scores, tokenizer folders, repeated
options and the labels of transfer rows. Each test failed before its fix."""

from __future__ import annotations

import json

import pytest

from judgecal.cli import main


def _json(r):
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def _one_line_refusal(r, *needles, code=2):
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.output and "unexpected" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


@pytest.fixture(scope="module")
def board_db(tmp_path_factory, data_dir):
    """LLMBar Natural and Adversarial_Neighbor (both judges), an Auto-J family no judge rated, and
    fits: #1 GPT-4 on Natural, #2 ChatGPT on Natural, #3 ChatGPT on Natural with --density (the
    newest of that family and judge)."""
    from tests.test_importers_judgesets import AUTOJ

    tmp = tmp_path_factory.mktemp("board")
    url = f"sqlite:///{tmp / 'board.db'}"
    autoj = tmp / "autoj.jsonl"
    autoj.write_text("\n".join(json.dumps(r) for r in AUTOJ) + "\n")
    cmds = [["import", "llmbar", str(data_dir / "llmbar" / f)] for f in ("Natural", "Adversarial_Neighbor")]
    cmds.append(["import", "autoj", str(autoj)])
    fit = ["fit", "--task-family", "llmbar/Natural", "--length-unit", "words", "--bootstrap", "20", "--folds", "2",
           "--no-nested", "--format", "json"]
    cmds += [fit + ["--judge", "GPT-4"], fit + ["--judge", "ChatGPT"], fit + ["--judge", "ChatGPT", "--density"]]
    for c in cmds:
        try:
            main(["--database-url", url, *c])
        except SystemExit as exc:
            assert exc.code == 0, c
    return url


# ---------------------------------------------------------------- 1-4: leaderboard, export, check
def test_leaderboard_refuses_a_calibration_of_another_family(board_db, tmp_path, run_cli):
    base = ("--database-url", board_db, "leaderboard", "--judge", "ChatGPT", "--calibration", "2",
            "--task-family", "llmbar/Adversarial_Neighbor", "--bootstrap", "20")
    _one_line_refusal(run_cli(*base), "calibration 2 is of task family 'llmbar/Natural'", "--calibration-from llmbar/Natural")
    r = run_cli("--database-url", board_db, "export", "leaderboard", tmp_path / "b.csv", "--judge", "ChatGPT",
                "--calibration", "2", "--task-family", "llmbar/Adversarial_Neighbor")
    _one_line_refusal(r, "calibration 2 is of task family 'llmbar/Natural'")
    # with --calibration-from its family, the id is applied explicitly as a transfer, and labelled so
    moved = _json(run_cli(*base, "--calibration-from", "llmbar/Natural", "--format", "json"))
    assert moved["calibrations"] == {}
    assert moved["calibrations_from"] == {"llmbar/Adversarial_Neighbor": {"id": 2, "fitted_on": "llmbar/Natural"}}
    assert all("calibration from another family" in r["flags"] for r in moved["rows"])
    # ChatGPT's Natural fit has gamma 0 under the short-side floor (issue 18: its unfloored gamma,
    # 0.118, came only from crediting answers under a quarter of L_ref), so the penalty is seen
    # applied with GPT-4's (#1, gamma 0.38)
    gpt4 = _json(run_cli("--database-url", board_db, "leaderboard", "--judge", "GPT-4", "--calibration", "1",
                         "--task-family", "llmbar/Adversarial_Neighbor", "--bootstrap", "20",
                         "--calibration-from", "llmbar/Natural", "--format", "json"))
    assert gpt4["calibrations_from"] == {"llmbar/Adversarial_Neighbor": {"id": 1, "fitted_on": "llmbar/Natural"}}
    assert all(r["mean_calibrated"] != pytest.approx(r["mean_raw"]) for r in gpt4["rows"])


def test_leaderboard_refuses_a_calibration_of_another_judge(board_db, run_cli):
    r = run_cli("--database-url", board_db, "leaderboard", "--judge", "ChatGPT", "--calibration", "1", "--bootstrap", "20")
    _one_line_refusal(r, "calibration 1 is of judge 'GPT-4', not 'ChatGPT'")
    # without --judge the calibration names its judge
    board = _json(run_cli("--database-url", board_db, "leaderboard", "--calibration", "1", "--bootstrap", "20",
                          "--format", "json"))
    assert board["judge"] == "GPT-4" and board["calibrations"] == {"llmbar/Natural": 1}


def test_check_refuses_a_calibration_of_another_judge_and_gates_its_transfer(board_db, run_cli):
    base = ("--database-url", board_db, "check", "--min-agreement-gain", "-1", "--max-verbosity-winrate", "1")
    # another family with --calibration ID is a transfer target (issue 18): gated, never ignored
    tr = json.loads(run_cli(*base, "--calibration", "2", "--task-family", "llmbar/Adversarial_Neighbor",
                            "--format", "json").stdout)
    transfer = [c for c in tr["checks"] if c["check"] == "transfer"]
    assert [(c["task_family"], c["judge"]) for c in transfer] == [("llmbar/Adversarial_Neighbor", "ChatGPT")]
    assert "calibration 2 from llmbar/Natural" in transfer[0]["message"]
    _one_line_refusal(run_cli(*base, "--calibration", "1", "--judge", "ChatGPT"), "calibration 1 is of judge 'GPT-4'")
    ok = json.loads(run_cli(*base, "--calibration", "2", "--judge", "ChatGPT", "--task-family", "llmbar/Natural",
                            "--format", "json").stdout)
    assert {(c["task_family"], c["judge"]) for c in ok["checks"]} == {("llmbar/Natural", "ChatGPT")}


def test_calibration_from_uses_the_named_calibration_and_only_rated_families(board_db, run_cli):
    base = ("--database-url", board_db, "leaderboard", "--judge", "ChatGPT", "--bootstrap", "20", "--format", "json")
    # the newest ChatGPT fit of Natural (#3) uses the density exemption: refused as a donor, like `report` does
    r = run_cli(*base, "--calibration-from", "llmbar/Natural")
    _one_line_refusal(r, "calibration 3 of 'llmbar/Natural' uses the density exemption")
    _one_line_refusal(run_cli(*base, "--calibration", "3", "--calibration-from", "llmbar/Natural"),
                      "calibration 3 of 'llmbar/Natural' uses the density exemption")
    board = _json(run_cli(*base, "--calibration", "2", "--calibration-from", "llmbar/Natural"))
    assert board["calibrations"] == {"llmbar/Natural": 2}
    # Natural's own (named) fit, the named fit as donor, never the newest #3; the Auto-J family has no
    # rating by ChatGPT: not listed as calibrated
    assert board["calibrations_from"] == {"llmbar/Adversarial_Neighbor": {"id": 2, "fitted_on": "llmbar/Natural"}}
    assert "autoj/seeking_advice" in board["families"]
    r = run_cli(*base, "--calibration", "2", "--calibration-from", "llmbar/Adversarial_Neighbor")
    _one_line_refusal(r, "calibration 2 is of task family 'llmbar/Natural' but --calibration-from names")


# ---------------------------------------------------------------- 5: nested selection honours --gamma-max
def test_nested_selection_honours_gamma_max_and_signed():
    from judgecal.calibrate.baselines import FitContext
    from judgecal.calibrate.evaluate import evaluate_pairwise
    from judgecal.calibrate.select import candidates
    from tests.test_calibration_actionable import _short_favouring

    d = _short_favouring(120, seed=1)  # a judge favouring SHORT answers: gamma ~ -1.5 fits best
    for signed in (True, False):
        ctx = FitContext(l_ref=100.0, scale=(0.0, 10.0), p_bounds=(1.0, 1.5), signed=signed, gamma_max=0.5)
        cands = candidates({"words": d}, "words", ctx, "pairwise")
        bounded = [c for c in cands if c["name"].startswith(("linear", "polylog"))]
        assert bounded and all(c["ctx"].gamma_max == 0.5 for c in bounded)
        assert any(c["ctx"].signed for c in bounded) is signed
        assert not any("181" in c["description"] or "100" in c["description"] for c in cands)
    ev = evaluate_pairwise(d, scale=(0, 10), n_bootstrap=20, seed=0, signed=True, gamma_max=0.5, folds=3,
                           variants={"words": d}, unit="words")
    sel = ev["selection"]
    assert sel is not None and ev["params"]["gamma"] >= -0.5 - 1e-9
    assert "[-0.5, 0.5]" in sel["recommended_description"] or sel["recommended_method"] in ("raw", "lowess", "lc_glm")
    assert not any(n.endswith("gamma<=10]") for n in sel["candidates"])  # no candidate looser than the bound


# ---------------------------------------------------------------- 6-8, 10, 15: importers
def _jb_line(pair_id="p1", label="A>B", scores=(1.0, 2.0), judge_model="rm", **extra):
    from tests.test_importers_judgesets import JB

    judgment = {"scores": list(scores)}
    if judge_model is not None:
        judgment["judge_model"] = judge_model
    extra.setdefault("question", f"{JB['question']} ({pair_id})")
    rec = dict(JB, pair_id=pair_id, label=label, judge_name="reward_model",
               judgments=[{"judgment": judgment}, {"judgment": dict(judgment, scores=list(scores)[::-1])}], **extra)
    return json.dumps(rec)


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "null", "true", "false", '"x"', '"1.5"', "1e300"])
def test_judgebench_scores_that_are_not_finite_numbers_are_errors(tmp_path, sqlite_url, run_cli, bad):
    path = tmp_path / "out.jsonl"
    path.write_text(_jb_line(pair_id="ok") + "\n" + _jb_line(pair_id="bad").replace("[1.0, 2.0]", f"[1.0, {bad}]", 1) + "\n")
    r = run_cli("--database-url", sqlite_url, "import", "judgebench", path)
    _one_line_refusal(r, "out.jsonl:2", "judgments[0].judgment.scores[1]")


def test_judgebench_conflicting_labels_and_repeats(tmp_path, db_url, run_cli):
    path = tmp_path / "data.jsonl"
    path.write_text(_jb_line("p1", "A>B") + "\n" + _jb_line("p2", "B>A") + "\n" + _jb_line("p1", "B>A") + "\n")
    _one_line_refusal(run_cli("--database-url", db_url, "import", "judgebench", path),
                      "data.jsonl:3", "pair_id 'p1'", "data.jsonl:1")
    # exact repeats within a file: kept once, with a counted warning; across files (data + outputs) silent
    path.write_text("\n".join([_jb_line("p1"), _jb_line("p1"), _jb_line("p2"), _jb_line("p1")]) + "\n")
    other = tmp_path / "more.jsonl"
    other.write_text(_jb_line("p1") + "\n")
    out = _json(run_cli("--database-url", db_url, "import", "judgebench", path, other, "--format", "json"))
    assert out["added"]["expert_label"] == 2 and out["added"]["rating"] == 8  # 2 pairs x 2 answers x 2 orders
    assert [w for w in out["warnings"] if "repeat" in w] == [f"{path}: 2 records repeat a pair already read from this file exactly: kept once"]
    # two pair_ids holding the same question and responses with opposite labels
    path.write_text(_jb_line("p1", "A>B", question="q") + "\n" + _jb_line("p9", "B>A", question="q") + "\n")
    _one_line_refusal(run_cli("--database-url", db_url, "import", "judgebench", path), "data.jsonl:2", "data.jsonl:1")
    # the same response scored differently in the same order by the same judge
    path.write_text(_jb_line("p1") + "\n" + _jb_line("p1", scores=(1.0, 3.0)) + "\n")
    _one_line_refusal(run_cli("--database-url", db_url, "import", "judgebench", path), "data.jsonl:2", "data.jsonl:1")


def test_judgebench_judge_name_clash_and_missing_judge_model(tmp_path, sqlite_url, run_cli, data_dir):
    assert run_cli("--database-url", sqlite_url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    path = tmp_path / "out.jsonl"
    path.write_text(_jb_line("p1", judge_model="GPT-4") + "\n")
    r = run_cli("--database-url", sqlite_url, "import", "judgebench", path)
    _one_line_refusal(r, "judge 'GPT-4' already exists", "scale 0-10", "distinct judge_model")
    assert run_cli("--database-url", sqlite_url, "fit", "--list", "--judge", "GPT-4").exit_code == 0  # not ambiguous
    path.write_text(_jb_line("p1", judge_model=None) + "\n" + _jb_line("p2", judge_model=None) + "\n")
    out = _json(run_cli("--database-url", sqlite_url, "import", "judgebench", path, "--format", "json"))
    assert "4 reward-model judgments have no judgment.judge_model: their scores were filed under judge 'reward_model'" in out["warnings"]
    # a re-import of the same reward model is no clash
    assert run_cli("--database-url", sqlite_url, "import", "judgebench", path).exit_code == 0


def test_empty_judgebench_file_and_empty_llmbar_set_warn(tmp_path, sqlite_url, run_cli):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = _json(run_cli("--database-url", sqlite_url, "import", "judgebench", empty, "--format", "json"))
    assert out["warnings"] == [f"{empty}: no record (an empty file): nothing imported from it"]
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "dataset.json").write_text("[]")
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", tmp_path / "set")
    assert r.exit_code == 0 and "no record (an empty array)" in r.output


def test_autoj_task_family_does_not_need_scenario(tmp_path, sqlite_url, run_cli):
    from tests.test_importers_judgesets import AUTOJ

    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps({k: v for k, v in r.items() if k != "scenario"}) for r in AUTOJ) + "\n")
    out = _json(run_cli("--database-url", sqlite_url, "import", "autoj", path, "--task-family", "F", "--format", "json"))
    assert out["added"]["expert_label"] == 3
    r = run_cli("--database-url", sqlite_url, "import", "autoj", path)
    _one_line_refusal(r, "pairs.jsonl:1", "scenario")


@pytest.mark.parametrize("value,share", [("92.0%", 0.92), ("68.5%", 0.685), (0.75, 0.75), ("0.75", 0.75), (75, 0.75),
                                         (1, 1.0), ("100.0%", 1.0)])
def test_llmbar_correct_average_percentage_or_share(value, share):
    from judgecal.importers.llmbar import correct_average_share

    assert correct_average_share(value) == pytest.approx(share)


@pytest.mark.parametrize("value", ["NaN", "Infinity", '"nan%"', "true", '"n/a"', "150", "-1"])
def test_llmbar_statistics_not_a_finite_accuracy_is_a_warning(tmp_path, value):
    from judgecal.importers import llmbar
    from tests.test_importers_judgesets import _write_llmbar_repo

    root = _write_llmbar_repo(tmp_path / "LLMBar")
    stats = root / "Dataset" / "LLMBar" / "Natural" / "evaluators" / "GPT-4" / "Rating" / "statistics.json"
    stats.write_text('{"correct_average": %s}' % value)
    batch = llmbar.parse_any(root)
    assert [w for w in batch.warnings if "no readable correct_average" in w and str(stats) in w], batch.warnings
    stats.write_text('{"correct_average": 0.5}')  # a share, not 0.5%
    assert any("correct_average is 0.5000 but the imported scores give 1.0000" in w for w in llmbar.parse_any(root).warnings)


# ---------------------------------------------------------------- 9: overflowing scores
def test_overflowing_scores_are_refused_and_never_warn(tmp_path, db_url, run_cli, recwarn):
    import numpy as np

    from judgecal.calibrate.data import PairData
    from judgecal.calibrate.evaluate import evaluate_pairwise
    from judgecal.errors import UsageError

    rng = np.random.default_rng(0)
    lines = []
    for i in range(30):
        na, nb = (int(x) for x in rng.integers(5, 200, 2))
        lines.append(_jb_line(f"p{i}", "A>B" if i % 3 else "B>A", scores=(1.0 * i, -2.0 * i), judge_model="rm",
                              response_A=" ".join(["a"] * na), response_B=" ".join(["b"] * nb)))
    path = tmp_path / "rm.jsonl"
    path.write_text("\n".join(lines) + "\n")
    big = tmp_path / "big.jsonl"
    big.write_text(path.read_text().replace('"scores": [0.0, -0.0]', '"scores": [1e300, -1e300]', 1))
    _one_line_refusal(run_cli("--database-url", db_url, "import", "judgebench", big), "big.jsonl:1", "1e+300")
    # scores already stored beyond the bound (an older import): the fit refuses them before any method runs
    assert run_cli("--database-url", db_url, "import", "judgebench", path).exit_code == 0
    from sqlalchemy import create_engine, text

    eng = create_engine(db_url)
    with eng.begin() as c:
        c.execute(text("update rating set score = score * 1e290"))
    eng.dispose()
    r = run_cli("--database-url", db_url, "fit", "--task-family", "judgebench", "--judge", "rm", "--signed",
                "--length-unit", "words", "--bootstrap", "20", "--folds", "2")
    _one_line_refusal(r, "beyond what a fit can use")
    assert "RuntimeWarning" not in r.output
    d = PairData(np.arange(20), np.arange(20) * 1e299, -np.arange(20) * 1e299, np.arange(20) + 5.0,
                 np.arange(20)[::-1] + 5.0, (np.arange(20) % 2).astype(float))
    with pytest.raises(UsageError, match="beyond what a fit can use"):
        evaluate_pairwise(d, scale=(-np.inf, np.inf), n_bootstrap=20, signed=True, nested=False)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_numerical_warnings_become_fit_warnings_and_overflow_is_not_converged():
    import warnings

    from judgecal.views.fitting import _numeric_warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("overflow encountered in multiply", RuntimeWarning)
        warnings.warn("overflow encountered in multiply", RuntimeWarning)
    ev = {"params": {"converged": True}, "warnings": []}
    _numeric_warnings(ev, caught)
    assert ev["params"]["converged"] is False
    assert ev["warnings"][0] == "numerical warning during the fit: overflow encountered in multiply"
    assert len(ev["warnings"]) == 2


# ---------------------------------------------------------------- 11: tokenizer folders
def test_bad_hf_tokenizer_folders_are_usage_errors(tmp_path, sqlite_url, run_cli, data_dir):
    assert run_cli("--database-url", sqlite_url, "import", "llmbar", data_dir / "llmbar" / "Natural").exit_code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer_config.json").write_text("{}")  # a tokenizer file, but nothing loadable
    cases = [("hf:", "--tokenizer hf: names no folder"), (f"hf:{empty}", f"folder {empty} holds no tokenizer files"),
             (f"hf:{tmp_path / 'missing'}", "does not exist"), (f"hf:{broken}", "cannot be loaded")]
    for tok, needle in cases:
        _one_line_refusal(run_cli("--database-url", sqlite_url, "lengths", "--tokenizer", tok), "--tokenizer hf:", needle)
    _one_line_refusal(run_cli("--database-url", sqlite_url, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4",
                              "--tokenizer", f"hf:{empty}", "--bootstrap", "20"), f"--tokenizer hf:{empty}", "no tokenizer files")


# ---------------------------------------------------------------- 12-13: repeated options, --select-units
def test_report_repeated_calibration_and_family_count_once(board_db, run_cli):
    base = ("--database-url", board_db, "report", "--bootstrap", "20", "--format", "json")
    rep = _json(run_cli(*base, "--calibration", "2", "--calibration", "2", "--calibration", "1"))
    assert [e["calibration_id"] for e in rep["entries"]] == [2, 1]
    rep = _json(run_cli(*base, "--calibration", "2", "--task-family", "llmbar/Adversarial_Neighbor",
                        "--task-family", "llmbar/Adversarial_Neighbor"))
    assert [(e["task_family"], e["kind"]) for e in rep["entries"]] == [("llmbar/Adversarial_Neighbor", "transfer")]
    rep = _json(run_cli(*base, "--task-family", "llmbar/Natural", "--task-family", "llmbar/Natural", "--judge", "GPT-4"))
    assert [e["calibration_id"] for e in rep["entries"]] == [1]
    board = _json(run_cli("--database-url", board_db, "leaderboard", "--judge", "GPT-4", "--bootstrap", "20", "--format",
                          "json", "--task-family", "llmbar/Natural", "--task-family", "llmbar/Natural"))
    assert board["families"] == ["llmbar/Natural"]
    # --judge by model name or id is checked the same way as by name
    from sqlalchemy import create_engine, text

    eng = create_engine(board_db)
    with eng.connect() as c:
        chatgpt = c.execute(text("select id from judge where name = 'ChatGPT'")).scalar_one()
    eng.dispose()
    _one_line_refusal(run_cli(*base, "--calibration", "1", "--judge", str(chatgpt)), "calibration 1 is of judge 'GPT-4'")


def test_fit_select_units_refused_when_empty_or_unused(board_db, run_cli):
    base = ("--database-url", board_db, "fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4", "--length-unit",
            "words", "--bootstrap", "20")
    for value in ("", " , "):
        _one_line_refusal(run_cli(*base, "--select-units", value), "--select-units", "names no length unit")
    _one_line_refusal(run_cli(*base, "--no-nested", "--select-units", "chars"), "--select-units", "--no-nested")
    _one_line_refusal(run_cli(*base, "--folds", "0", "--select-units", "chars"), "--select-units", "--folds 0")
    from judgecal.errors import UsageError
    from judgecal.views.fitting import evaluate_family

    with pytest.raises(UsageError, match="select-units"):
        evaluate_family("llmbar/Natural", "GPT-4", length_unit="words", nested=False, select_units=["chars"], url=board_db)


# ---------------------------------------------------------------- 14: transfer rows are not labelled CV
def test_transfer_rows_are_marked_target_not_cv_in_every_summary(board_db, tmp_path, run_cli):
    base = ("--database-url", board_db, "report", "--calibration", "2", "--task-family", "llmbar/Adversarial_Neighbor",
            "--bootstrap", "20", "--no-plots")
    rep = _json(run_cli(*base, "--format", "json"))
    raw = rep["entries"][0]["methods"]["raw"]["agreement"]
    md = run_cli(*base, "--format", "markdown").stdout
    assert run_cli(*base, "--format", "html", "--out", tmp_path).exit_code == 0
    html = (tmp_path / "report.html").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| llmbar/Adversarial\\_Neighbor") or
               line.startswith("| llmbar/Adversarial_Neighbor"))
    # Markdown keeps 10 summary columns: "best (CV)" is named under the table, so raw and calibrated carry the mark
    assert f"{raw:.3f} (target, not CV)" in row and row.count("(target, not CV)") == 2 and "best (CV)" in md, row
    assert html.count("(target, not CV)") == 3
    from judgecal.report.build import summary_rows

    own = _json(run_cli("--database-url", board_db, "report", "--calibration", "2", "--bootstrap", "20", "--format", "json"))
    assert not any("not CV" in cell for cell in summary_rows(own)[0])  # a fit's own row keeps its CV figures
