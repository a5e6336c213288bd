"""Issue 35 item 7: no score from outside the scale.

- A judgment whose distribution puts less than MIN_IN_SCALE of its mass on the scale is
  unparsed, served (``--logprobs``) and local (forward) alike: before, ``rate --local`` stored an
  ok score while 0.99996 of its distribution lay off the scale (the verdict prefix ``Rating:``
  without its space: the model writes `` 3``), and the served path stored an ok ``[[7]]`` whose
  verdict token had 0.001 of its probability on the scale.
- ``--summary mean`` warns and counts the ratings whose distribution has half or more outside
  the scale (it ranked them without a word).
- ``check`` no longer passes "identified" for a constant judge (every score 5, gamma at its
  lower bound, "the raw judge").
- The repeated-answer / constant-answer guard no longer folds the digits that are the answer:
  on a numeric task "The answer is 417." and "The answer is 12." are two answers (every model
  was flagged "constant")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from stub_openai import StubServer

from judgecal import config
from judgecal.calibrate.guards import model_flags, no_credit, template_key
from judgecal.judge import distribution as D


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _ratings(url: str) -> list[tuple]:
    from sqlalchemy import create_engine, text

    e = create_engine(url)
    with e.connect() as c:
        rows = c.execute(text("SELECT status, score, error, expected_score, distribution FROM rating ORDER BY id")).all()
    e.dispose()
    return [(r[0], r[1], r[2], r[3], json.loads(r[4]) if isinstance(r[4], str) else r[4]) for r in rows]


# ------------------------------------------------------------------ the in-scale rule
def test_too_little_on_the_scale_is_a_reason():
    assert D.too_little_on_scale(None) is None
    assert D.too_little_on_scale({"probs": {"1": 1.0}, "outside": None}) is None
    assert D.too_little_on_scale({"probs": {"1": 1.0}, "outside": 1 - D.MIN_IN_SCALE}) is None  # at the threshold: kept
    why = D.too_little_on_scale({"probs": {"1": 1.0}, "outside": 0.99999998, "source": "forward"})
    assert why.startswith("only 2e-08 of the judge's probability is on a verdict of the scale") and "--verdict-prefix" in why


def test_served_verdict_with_almost_nothing_on_the_scale_is_unparsed(tmp_path, db_url):
    """--logprobs: the verdict token [[7]] had 0.001 on the scale, the rest on other tokens."""
    from judgecal.views import importing
    from judgecal.views.rate import run_rate

    rows = [{"task_family": "f", "prompt": f"q{i}", "model": "m", "response": f"answer {i}"} for i in range(2)]
    importing.import_generic(_jsonl(tmp_path / "r.jsonl", rows), "responses", "jsonl", url=db_url)
    top = {"7": math.log(0.001), "x": math.log(0.6), "y": math.log(0.399)}
    with StubServer(verdict_top=top) as s:
        out = run_rate(judge="stub", base_url=s.base_url, database_url=db_url, progress=False, logprobs=True)
    assert out["this_run"]["ok"] == 0 and out["this_run"]["unparsed"] == 2, out
    for status, score, error, expected, dist in _ratings(db_url):
        assert status == "unparsed" and score is None
        assert error.startswith("only 0.001 of the judge's probability is on a verdict of the scale"), error
        assert dist["outside"] == pytest.approx(0.999) and expected == pytest.approx(7.0)  # kept, as extra information
    # a verdict token with most of its mass on the scale stays ok (the stub's default: 0.9 on 7 and 8)
    with StubServer() as s:
        out = run_rate(judge="stub2", base_url=s.base_url, database_url=db_url, progress=False, logprobs=True)
    assert out["this_run"]["ok"] == 2


MODEL_DIR = config.default_model_dir()


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not (MODEL_DIR / "config.json").is_file(), reason=f"model folder {MODEL_DIR} is absent")
def test_local_greedy_verdict_with_almost_nothing_on_the_scale_is_unparsed(tmp_path, data_dir, run_cli):
    """The real SmolLM2 judge: with the verdict prefix 'Rating:' (no space) its greedy text is
    'Rating: 3' and the like, read as ok before, while the verdicts right after the prefix hold
    about 4e-5 of its probability."""
    from judgecal.views import importing

    url = f"sqlite:///{tmp_path / 'l.db'}"
    items = json.loads((data_dir / "llmbar" / "Natural" / "dataset.json").read_text(encoding="utf-8"))
    rows = [{"task_family": "f", "prompt": items[i]["input"], "model": f"m{i}", "response": items[i]["output_1"]}
            for i in (0, 1)]
    importing.import_generic(_jsonl(tmp_path / "r.jsonl", rows), "responses", "jsonl", url=url)
    r = run_cli("--database-url", url, "rate", "--local", "smollm2", "--prompt", "pointwise_fewshot_v1",
                "--verdict-prefix", "Rating:", "--format", "json")
    assert r.exit_code == 0, r
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["this_run"]["unparsed"] == 2 and summary["this_run"]["ok"] == 0, summary["this_run"]
    for status, score, error, expected, dist in _ratings(url):
        assert status == "unparsed" and score is None and dist["greedy"] is None
        assert dist["outside"] > 1 - D.MIN_IN_SCALE and "is on a verdict of the scale" in error, (error, dist)


# ------------------------------------------------------------------ --summary mean warns
def test_summary_mean_warns_and_counts_ratings_mostly_outside_the_scale(tmp_path, db_url, run_cli):
    from judgecal.views import importing
    from judgecal.views.leaderboard import build_leaderboard

    recs = []
    for i in range(6):
        for model, outside in (("mostly-outside", 0.95), ("in-scale", 0.05)):
            probs = {str(v): 0.0 for v in range(1, 11)}
            probs["7" if model == "in-scale" else "9"] = 1.0
            recs.append({"task_family": "f", "prompt": f"q{i}", "model": model, "response": f"{model} answer {i}",
                         "judge": "J", "scale_min": 1, "scale_max": 10, "score": 7 if model == "in-scale" else 9,
                         "raw_output": "[[x]]", "distribution": {"probs": probs, "outside": outside, "source": "forward"}})
    importing.import_generic(_jsonl(tmp_path / "r.jsonl", recs), "ratings", "jsonl", url=db_url)
    board = build_leaderboard(judge="J", url=db_url, min_ratings=1, n_bootstrap=0, summary="mean")
    note = [n for n in board["notes"] if "outside the scale" in n]
    assert len(note) == 1, board["notes"]
    assert note[0].startswith("--summary mean: 6 of 12 ok ratings (mostly-outside: 6) come from distributions with "
                              "50% or more of their mass outside the scale"), note
    assert not [n for n in build_leaderboard(judge="J", url=db_url, min_ratings=1, n_bootstrap=0)["notes"]
                if "outside the scale" in n]  # greedy reads the verdict written: nothing to say
    r = run_cli("--database-url", db_url, "leaderboard", "--judge", "J", "--summary", "mean", "--min-ratings", "1",
                "--bootstrap", "0")
    assert r.exit_code == 0 and "6 of 12 ok ratings (mostly-outside: 6)" in " ".join(r.output.split()), r


# ------------------------------------------------------------------ a constant judge is not identified
def _constant_judge_files(folder: Path, n: int = 24) -> tuple[Path, Path]:
    labels, ratings = [], []
    for i in range(n):
        short, long = f"Short answer {i}.", f"Long answer {i}: " + "more detail " * (5 + i % 7)
        # the experts prefer the longer answer: no length penalty (gamma >= 0) helps, gamma = 0
        labels.append({"task_family": "f", "prompt": f"question {i}", "model_a": "m_short", "response_a": short,
                       "model_b": "m_long", "response_b": long, "preference": "b" if i % 6 else "a"})
        for model, text in (("m_short", short), ("m_long", long)):
            ratings.append({"task_family": "f", "prompt": f"question {i}", "model": model, "response": text,
                            "judge": "constant", "scale_min": 1, "scale_max": 10, "score": 5, "raw_output": "[[5]]"})
    return _jsonl(folder / "labels.jsonl", labels), _jsonl(folder / "ratings.jsonl", ratings)


def test_check_fails_identified_for_a_constant_judge(tmp_path, db_url, run_cli):
    from judgecal.views import importing

    labels, ratings = _constant_judge_files(tmp_path)
    importing.import_generic(labels, "labels", "jsonl", url=db_url)
    importing.import_generic(ratings, "ratings", "jsonl", url=db_url)
    fit = run_cli("--database-url", db_url, "fit", "--task-family", "f", "--judge", "constant", "--bootstrap", "20",
                  "--format", "json")
    assert fit.exit_code == 0, fit
    ident = json.loads(fit.stdout)["identification"]
    assert ident["identified"] is False
    assert any(r.startswith("the judge gave every labelled answer the same score (5)") for r in ident["reasons"]), ident
    r = run_cli("--database-url", db_url, "check", "--task-family", "f", "--judge", "constant", "--format", "json")
    checks = {c["check"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["identified"]["ok"] is False and "same score (5)" in checks["identified"]["message"], checks
    assert r.exit_code == 1


# ------------------------------------------------------------------ digits that are the answer
def test_numeric_answers_are_not_one_template():
    answers = {model: [f"The answer is {(i * k * 37) % 1000}." for i in range(30)] for k, model in ((3, "a"), (7, "b"))}
    model = [mo for mo, texts in answers.items() for _ in texts]
    item = [i for texts in answers.values() for i in range(len(texts))]
    keys = [template_key(t) for texts in answers.values() for t in texts]
    words = [len(t.split()) for texts in answers.values() for t in texts]
    assert len(set(keys)) == len({t for texts in answers.values() for t in texts})  # one key per distinct answer
    assert model_flags(model, item, keys, words) == {}  # no model is "constant"
    assert not no_credit(model, item, keys, words).any()
    # a long answer ending in its number keeps it; the counter inside a long boilerplate still folds
    long = "After working through every step of the problem carefully, the final answer is {}."
    assert template_key(long.format(417)) != template_key(long.format(12))
    tmpl = [f"Here is my answer to request {i}: I believe the best approach is to think carefully." for i in range(30)]
    assert len({template_key(t) for t in tmpl}) == 1
    # the same answer repeated is still one answer
    assert template_key("The answer is 417.") == template_key("the  answer is 417.")


def test_numeric_task_board_flags_no_model_constant(tmp_path, db_url):
    from judgecal.views import importing
    from judgecal.views.leaderboard import build_leaderboard

    recs = [{"task_family": "arith", "prompt": f"What is {i} times {k}?", "model": f"model{k}",
             "response": f"The answer is {i * k}.", "judge": "J", "scale_min": 1, "scale_max": 10,
             "score": 1 + (i + k) % 10, "raw_output": "[[5]]"} for k in (3, 7) for i in range(2, 32)]
    importing.import_generic(_jsonl(tmp_path / "r.jsonl", recs), "ratings", "jsonl", url=db_url)
    board = build_leaderboard(judge="J", url=db_url, min_ratings=1, n_bootstrap=0)
    assert {r["model"] for r in board["rows"]} == {"model3", "model7"}
    for row in board["rows"]:
        assert row["degenerate_answers"] == [] and not any("same answer" in f for f in row["flags"]), row
