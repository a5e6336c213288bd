"""Importers of the judge-evaluation sets teams use, each on a small real excerpt written here:
the LLMBar repository's own layout, Auto-J's pairwise test file, JudgeBench (reward-model
scores on an unbounded scale)."""

from __future__ import annotations

import json
import math

import pytest

from judgecal.importers import autoj, judgebench, llmbar

# --- LLMBar: three real records of Dataset/LLMBar/Adversarial/Manual (dataset.json) with their
# GPT-4 "Rating" results (evaluators/GPT-4/Rating/result.json), verbatim from princeton-nlp/LLMBar.
MANUAL = [
    {"input": "What happened on October 1, 2017 in Catalonia?",
     "output_1": "On October 1, 2017, Catalonia was located in the northeastern part of Spain, known for its distinctive culture, language (Catalan), and significant contributions to Spain's economy and history. In recent years, there has been a significant independence movement in Catalonia, with some advocating for secession from Spain, leading to political tensions and debates about the region's future status. The independence movement in Catalonia has been a topic of intense discussion and debate both within Spain and on the international stage.",
     "output_2": "There was an independence referendum.", "label": 2,
     "scores": ("2", "6")},
    {"input": "What is the typical wattage of a bulb in a lightbox?",
     "output_1": "The wattage of a bulb in a lightbox is typically measured in watts, which refers to the amount of power consumed by the bulb and determines its brightness level. The wattage of a bulb can vary depending on the size, purpose, and specific design of the lightbox.",
     "output_2": "Its wattage typically ranges from 5 watts to 100 watts.", "label": 2,
     "scores": ("4", "9")},
    {"input": "Identify the country with the most people living in poverty in 2020.",
     "output_1": "According to the World Bank, the country with the highest percentage of people living in poverty is Equatorial Guinea, where roughly 76.8% of the population lives on less than $1.90 a day.",
     "output_2": "It is India.", "label": 2,
     "scores": ("4", "9")},
]


def _write_llmbar_repo(root, accuracy="100.0%"):
    base = root / "Dataset" / "LLMBar"
    sets = {"Natural": MANUAL[:2], "Adversarial/Manual": MANUAL, "Adversarial/GPTOut": MANUAL[1:]}
    for name, recs in sets.items():
        d = base / name
        (d / "evaluators" / "GPT-4" / "Rating").mkdir(parents=True)
        (d / "evaluators" / "GPT-4" / "Vanilla").mkdir(parents=True)
        data = [{k: r[k] for k in ("input", "output_1", "output_2", "label")} for r in recs]
        (d / "dataset.json").write_text(json.dumps(data, indent=2))
        result = [dict(x, results=[{"score_1": [r["scores"][0], "stop"], "score_2": [r["scores"][1], "stop"],
                                    "swap = False": {"winner": "2"}, "swap = True": {"winner": "2"}}])
                  for x, r in zip(data, recs)]
        (d / "evaluators" / "GPT-4" / "Rating" / "result.json").write_text(json.dumps(result, indent=2))
        # statistics.json in LLMBar's format; every excerpt pair is decided correctly by the scores
        (d / "evaluators" / "GPT-4" / "Rating" / "statistics.json").write_text(json.dumps(
            {"correct_False": f"{len(recs)} / {len(recs)} = 100.0%", "correct_average": accuracy}))
        # Vanilla in the repository's shape: both orders, winners numbered as in the dataset;
        # the second record's swapped order chose output 1 (a position flip)
        (d / "evaluators" / "GPT-4" / "Vanilla" / "result.json").write_text(json.dumps(
            [dict(x, results=[{"swap = False": {"completion": ["Output (b)", "stop"], "winner": "2"},
                               "swap = True": {"completion": ["Output (b)" if i == 1 else "Output (a)", "stop"],
                                               "winner": "1" if i == 1 else "2"}}])
             for i, x in enumerate(data)], indent=2))
    return root


def test_llmbar_repository_layout_every_set(tmp_path):
    root = _write_llmbar_repo(tmp_path / "LLMBar")
    assert [f for _, f in llmbar.set_folders(root)] == [
        "llmbar/Adversarial_GPTOut", "llmbar/Adversarial_Manual", "llmbar/Natural"]
    batch = llmbar.parse_any(root)
    fams = sorted({ref.family for ref in batch.responses})
    assert fams == ["llmbar/Adversarial_GPTOut", "llmbar/Adversarial_Manual", "llmbar/Natural"]
    assert len(batch.pair_labels) == 2 + 3 + 2 and all(p[2] == "b" for p in batch.pair_labels)
    scores = sorted((r["response"].family, r["score"]) for r in batch.ratings if r["response"].model == "llmbar/output_2")
    assert ("llmbar/Adversarial_Manual", 6.0) in scores and len(batch.ratings) == 14
    assert {r["judge"].name for r in batch.ratings} == {"GPT-4"}
    assert {r["judge"].prompt_name for r in batch.ratings} == {"llmbar/Rating"}
    # the Vanilla protocol: one pairwise verdict per order of every pair, judge GPT-4/Vanilla
    assert len(batch.verdicts) == 2 * 7 and {v.judge.name for v in batch.verdicts} == {"GPT-4/Vanilla"}
    assert {v.judge.mode for v in batch.verdicts} == {"pairwise"}
    assert sorted((v.position, v.verdict) for v in batch.verdicts if v.a.family == "llmbar/Natural") == [
        ("ab", "b"), ("ab", "b"), ("ba", "a"), ("ba", "b")]
    assert batch.warnings == []  # statistics.json agrees with the imported scores
    # a single set folder of the repository layout, and Dataset/LLMBar itself
    one = llmbar.parse_any(root / "Dataset" / "LLMBar" / "Adversarial" / "Manual")
    assert {ref.family for ref in one.responses} == {"llmbar/Adversarial_Manual"}
    assert len(llmbar.parse_any(root / "Dataset" / "LLMBar").pair_labels) == 7
    # the Adversarial folder and the Dataset folder name the sets as the root does (never llmbar/Manual)
    assert [f for _, f in llmbar.set_folders(root / "Dataset" / "LLMBar" / "Adversarial")] == [
        "llmbar/Adversarial_GPTOut", "llmbar/Adversarial_Manual"]
    assert [f for _, f in llmbar.set_folders(root / "Dataset")] == [
        "llmbar/Adversarial_GPTOut", "llmbar/Adversarial_Manual", "llmbar/Natural"]


def test_llmbar_empty_statistics_is_not_counted_as_parity(tmp_path, sqlite_url, run_cli):
    root = _write_llmbar_repo(tmp_path / "LLMBar")
    (root / "Dataset" / "LLMBar" / "Natural" / "evaluators" / "GPT-4" / "Rating" / "statistics.json").write_text("{}")
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", root, "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["llmbar_statistics"]["compared"] == 2
    assert any("an empty object, no figure in it" in w for w in out["warnings"])


def test_llmbar_statistics_mismatch_is_a_warning(tmp_path):
    root = _write_llmbar_repo(tmp_path / "LLMBar", accuracy="50.0%")
    batch = llmbar.parse_any(root)
    assert any("correct_average is 0.5000 but the imported scores give 1.0000" in w for w in batch.warnings)


def test_llmbar_repository_layout_through_the_cli(tmp_path, sqlite_url, run_cli):
    root = _write_llmbar_repo(tmp_path / "LLMBar")
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", root, "--format", "json")
    assert r.exit_code == 0, r
    out = json.loads(r.stdout)
    assert out["added"]["expert_label"] == 7 and out["added"]["rating"] == 14
    assert out["added"]["pairwise_judgment"] == 14
    assert out["llmbar_statistics"]["compared"] == 3 and out["llmbar_statistics"]["differ"] == []
    r = run_cli("--database-url", sqlite_url, "import", "llmbar", root, "--task-family", "x")
    assert r.exit_code != 0 and "one family" in r.stderr and "Traceback" not in r.output


# --- Auto-J: records in the shape of data/test/testdata_pairwise.jsonl (fields and label coding
# from Auto-J's README: 0 = first preferred, 1 = second, 2 = tie); the first one is the README's.
AUTOJ = [
    {"scenario": "seeking_advice", "label": 0, "prompt": "What are the best strategies for finding a job after college.",
     "response 1": "Networking is one of the best strategies for finding a job after college: talk to alumni, attend career fairs and use your school's career centre.",
     "response 2": "I'm a software program at a company, and I might have some suggestions."},
    {"scenario": "seeking_advice", "label": 2, "prompt": "How do I stay motivated while studying?",
     "response 1": "Set small goals and reward yourself.", "response 2": "Break work into short sessions with breaks."},
    {"scenario": "code_generation", "label": "1", "prompt": "Write a Python function that returns the square of x.",
     "response 1": "def f(x): return x * 2", "response 2": "def square(x):\n    return x * x"},
]


def test_autoj_pairwise_file(tmp_path, sqlite_url, run_cli):
    path = tmp_path / "testdata_pairwise.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in AUTOJ) + "\n")
    batch = autoj.parse(path)
    assert [p[2] for p in batch.pair_labels] == ["a", "tie", "b"]
    assert sorted({ref.family for ref in batch.responses}) == ["autoj/code_generation", "autoj/seeking_advice"]
    assert {ref.model for ref in batch.responses} == {"autoj/response_1", "autoj/response_2"}
    r = run_cli("--database-url", sqlite_url, "import", "autoj", path, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"]["expert_label"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(dict(AUTOJ[0], label=3)) + "\n")
    r = run_cli("--database-url", sqlite_url, "import", "autoj", bad)
    assert r.exit_code != 0 and "bad.jsonl:1" in r.stderr and "label" in r.stderr and "Traceback" not in r.output


# --- JudgeBench: one real pair of data/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl as
# it appears in outputs/...judge_name=reward_model,judge_model=Skywork_Skywork-Reward-Llama-3.1-8B.jsonl
# (responses shortened to their final lines here; the scores are the file's), plus an arena_hard line.
JB = {"pair_id": "e302b0a0-28d5-5a3c-b1af-fedcf5543e72", "original_id": 1420, "source": "mmlu-pro-law",
      "question": "A college student initiated a criminal case against his former roommate ... will evidence of the student's reputation for dishonesty be admissible and why?",
      "response_model": "gpt-4o-2024-05-13",
      "response_A": "The best-balanced reasoning aligns with choice (F), as it clearly states that when character is directly at issue, such as in a malicious prosecution claim, it becomes admissible.\n\nHence my answer is:\nFFFFF",
      "response_B": "Based on these considerations, the best answer is:\n(A) Yes, because the student's reputation for dishonesty directly relates to the tort of malicious prosecution.\n\nSo, the correct and best-supported answer is:\nAAAAA",
      "label": "A>B"}
RM = dict(JB, judge_name="reward_model", judgments=[
    {"judgment": {"judge_model": "Skywork/Skywork-Reward-Llama-3.1-8B", "prompt": "", "response": "", "scores": [5.625, 14.625]}, "decision": "B>A"},
    {"judgment": {"judge_model": "Skywork/Skywork-Reward-Llama-3.1-8B", "prompt": "", "response": "", "scores": [14.625, 5.625]}, "decision": "A>B"}])
ARENA = dict(JB, judge_name="arena_hard", judgments=[{"judgment": {"judge_model": "o1-mini"}, "decision": "A>B"}])


def test_judgebench_reward_model_unbounded_scale(tmp_path, sqlite_url, run_cli):
    data = tmp_path / "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
    data.write_text(json.dumps(JB) + "\n")
    out = tmp_path / "outputs.jsonl"
    out.write_text(json.dumps(RM) + "\n" + json.dumps(ARENA) + "\n")
    batch = judgebench.parse([data, out])
    assert len(batch.pair_labels) == 1 and batch.pair_labels[0][2] == "a"  # one label, not one per file
    rm = [r for r in batch.ratings]
    assert len(rm) == 4 and {r["judge"].name for r in rm} == {"Skywork/Skywork-Reward-Llama-3.1-8B"}
    a_scores = sorted(r["score"] for r in rm if r["response"].text == JB["response_A"])
    assert a_scores == [5.625, 5.625]  # both presentation orders give A 5.625
    judge = rm[0]["judge"]
    assert judge.scale_min == -math.inf and judge.scale_max == math.inf
    assert sum(len(v) for k, v in batch.skipped.items() if "arena_hard" in k) == 1
    r = run_cli("--database-url", sqlite_url, "import", "judgebench", data, out, "--format", "json")
    assert r.exit_code == 0, r
    res = json.loads(r.stdout)
    assert res["added"]["rating"] == 4 and res["added"]["expert_label"] == 1


def test_judgebench_bad_scores_name_file_and_line(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps(dict(RM, judgments=[{"judgment": {"scores": [1.0]}}])) + "\n")
    with pytest.raises(Exception) as exc:
        judgebench.parse([out])
    assert "o.jsonl:1" in str(exc.value) and "scores" in str(exc.value)


def test_judgebench_unbounded_judge_fits_and_reports_without_clip(tmp_path, db_url, run_cli):
    """A reward model that favours SHORT answers, imported as JudgeBench outputs (unbounded
    scale), on both dialects: the infinite scale round-trips, a signed fit corrects it, and the
    report says the scale is unbounded."""
    import numpy as np

    rng = np.random.default_rng(0)
    lines = []
    for i in range(60):
        qa, qb = rng.normal(0, 1, 2)
        na, nb = rng.integers(5, 400, 2)
        ta, tb = " ".join(["a"] * int(na)), " ".join(["b"] * int(nb))
        sa, sb = 10 * qa - 4.8 * np.log(na), 10 * qb - 4.8 * np.log(nb)  # shorter scores higher
        lines.append(json.dumps(dict(JB, pair_id=str(i), question=f"q{i}", response_A=ta, response_B=tb,
                                     label="A>B" if qa > qb else "B>A", judge_name="reward_model",
                                     judgments=[{"judgment": {"judge_model": "rm", "scores": [sa, sb]}},
                                                {"judgment": {"judge_model": "rm", "scores": [sb, sa]}}])))
    path = tmp_path / "out.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert run_cli("--database-url", db_url, "import", "judgebench", path).exit_code == 0
    fit = run_cli("--database-url", db_url, "fit", "--task-family", "judgebench", "--judge", "rm", "--length-unit", "words",
                  "--signed", "--bootstrap", "20", "--no-nested", "--format", "json")
    assert fit.exit_code == 0, fit
    row = json.loads(fit.stdout)
    assert row["scale"] == [None, None] and row["signed"] is True and row["gamma"] < 0
    assert row["lean"]["direction"] == "shorter"
    rep = run_cli("--database-url", db_url, "report", "--calibration", str(row["id"]), "--format", "markdown")
    assert rep.exit_code == 0 and "unbounded scale (no clip)" in rep.stdout and "signed penalty" in rep.stdout
