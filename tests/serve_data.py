"""The database the ``judgecal serve`` tests browse (tests/test_serve.py, tests/test_serve_browser.py):
real data (LLMBar Natural's GPT-4 and ChatGPT ratings with the expert labels; three models'
AlpacaEval annotations against gpt4_1106_preview), one nested-CV calibration of GPT-4 (its
advice is "keep raw"), a hostile task family whose model names, answers, judge names and judge
outputs are HTML/script injections, and two multiple-choice runs (stored rows: no model is
loaded). Built once per test process."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
PWN = "<script>window.__pwned=1</script>"
PWN_IMG = '"><img src=x onerror="window.__pwned=1">'
HOSTILE_FAMILY = "hostile <b>family</b>"
HOSTILE_JUDGE = f"judge {SCRIPT}"
HOSTILE_PAIR_JUDGE = f"pair judge {IMG}"
HOSTILE_MODEL_A = f"model {IMG}"
HOSTILE_MODEL_B = f"model {SCRIPT}"
ALPACA_MODELS = ("alpaca-7b", "claude-2", "NullModel")
BASELINE = "gpt4_1106_preview"

_cache: dict[str, str] = {}


def hostile_records() -> dict[str, list[dict]]:
    """Generic-format records (docs/data-formats.md) for the hostile family: 3 items with two
    answers each, pairwise expert labels, ratings by a hostile pointwise judge (one unparsed)
    and verdicts of a hostile pairwise judge in both orders (one item inconsistent)."""
    labels, ratings, verdicts = [], [], []
    for i in range(3):
        prompt = f"Instruction {i} {SCRIPT} {PWN}"
        ra, rb = f"Answer a{i} {PWN} " + "word " * (5 + 10 * i), f"Answer b{i} {PWN_IMG}"
        labels.append({"prompt": prompt, "model_a": HOSTILE_MODEL_A, "response_a": ra, "model_b": HOSTILE_MODEL_B,
                       "response_b": rb, "preference": "ab"[i % 2]})
        for model, resp, score in ((HOSTILE_MODEL_A, ra, 7 + i), (HOSTILE_MODEL_B, rb, 8 - i)):
            rec = {"prompt": prompt, "model": model, "response": resp, "judge": HOSTILE_JUDGE, "scale_min": 1,
                   "scale_max": 10, "raw_output": f"Rating: [[{score}]] {PWN} {PWN_IMG}"}
            if i == 2 and model == HOSTILE_MODEL_B:
                rec.update(status="unparsed", raw_output=f"no score here {PWN}", error=f"no [[rating]] {SCRIPT}")
            else:
                rec["score"] = score
            ratings.append(rec)
        for pos, verdict in (("ab", "a"), ("ba", "a" if i != 1 else "b")):
            verdicts.append({"prompt": prompt, "model_a": HOSTILE_MODEL_A, "response_a": ra, "model_b": HOSTILE_MODEL_B,
                             "response_b": rb, "judge": HOSTILE_PAIR_JUDGE, "position": pos, "verdict": verdict,
                             "raw_output": f"Output ({verdict}) {PWN} {PWN_IMG}"})
    return {"labels": labels, "ratings": ratings, "verdicts": verdicts}


def store_mc_runs(url: str) -> list[int]:
    """Two stored multiple-choice runs (as ``judgecal mc score`` stores them; one model name
    hostile): acc up, acc_norm down between them."""
    from judgecal.db import models as m
    from judgecal.db.engine import get_engine, session_scope

    def metrics(acc, norm):
        return {"acc": {"value": acc, "stderr": 0.05, "n": 40}, "acc_norm": {"value": norm, "stderr": 0.05, "n": 40},
                "acc_bytes": {"value": norm, "stderr": 0.05, "n": 40}}

    engine = get_engine(url)
    ids = []
    with session_scope(engine) as s:
        for model, acc, norm in (("smollm2", 0.55, 0.60), (f"smollm2 {SCRIPT}", 0.60, 0.575)):
            run = m.McRun(model=model, task="copa", task_path="copa.jsonl", dataset_sha256="0" * 64, backend="hf",
                          n_items=40, settings={"prompt": "{query}", "null_context": "Answer:", "dtype": "float32"},
                          metrics=metrics(acc, norm), diagnostics={"headline": ["acc", "acc_norm"]})
            s.add(run)
            s.flush()
            ids.append(run.id)
    engine.dispose()
    return ids


def fill(url: str, data_dir: Path, work: Path, *, fit_nested: bool = True, alpaca: bool = True) -> dict:
    """Import everything into the (migrated or empty) database at ``url`` (``alpaca``: the
    AlpacaEval annotations too; ``fit_nested``: the fit's nested selection); returns what the
    tests need to know (calibration id, the fit, mc run ids)."""
    from judgecal.db import engine as eng
    from judgecal.db import migrate
    from judgecal.views import fitting, importing

    e = eng.create(url)
    migrate.upgrade(e, "head")
    e.dispose()
    importing.import_llmbar(data_dir / "llmbar" / "Natural", None, url)
    if alpaca:
        res = data_dir / "alpaca_eval" / "results"
        importing.import_alpaca_eval([res / name for name in ALPACA_MODELS], [], None, url)
    work.mkdir(parents=True, exist_ok=True)
    for kind, recs in hostile_records().items():
        path = work / f"hostile_{kind}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        importing.import_generic(path, kind, "jsonl", HOSTILE_FAMILY, url)
    fit = fitting.run_fit("llmbar/Natural", "GPT-4", url=url, length_unit="words", n_bootstrap=20,
                          folds=3 if fit_nested else 5, seed=0, nested=fit_nested)
    runs = store_mc_runs(url)
    return {"url": url, "calibration": fit["id"], "fit": fit, "mc_runs": runs}


def demo_db(tmp_path_factory, data_dir: Path) -> dict:
    """The SQLite database of this module's doc, built once per test process."""
    if "sqlite" not in _cache:
        folder = tmp_path_factory.mktemp("serve")
        _cache["sqlite"] = fill(f"sqlite:///{folder / 'serve.db'}", data_dir, folder / "files")
    return _cache["sqlite"]


# ---------------------------------------------------------------- the `make demo` database
#: ``make demo``'s commands (Makefile, target demo) on the same real inputs, smaller where the
#: demo is slow: the LLMBar fits on Natural only (the demo: 3 sets x 2 judges) with 20
#: bootstrap resamples (the demo: 500); mc scores 20 ARC-Easy items (the demo: 100). The local
#: judge's steps ("local judge": token lengths, rating 4 AlpacaEval and 14 LLMBar Natural items
#: with ``--local``, its fit and score board) take minutes on 2 CPU cores and run only when
#: asked (:func:`demo_like_db`). ``{D}``: the data folder, ``{OUT}``: the demo's output folder.
#: Steps marked "model" and "local judge" need the pulled SmolLM2 model.
DEMO_STEPS: list[tuple[str, list[str]]] = [
    ("", ["db", "upgrade"]),
    ("", ["import", "llmbar", "{D}/llmbar/Natural"]),
    ("", ["import", "llmbar", "{D}/llmbar/Adversarial_Neighbor"]),
    ("", ["import", "llmbar", "{D}/llmbar/Adversarial_GPTInst"]),
    ("", ["import", "pandalm", "{D}/pandalm/testset-v1.json"]),
    ("", ["import", "alpaca-eval", "{D}/alpaca_eval/gpt4_1106_preview.json", "--pair",
          "{D}/alpaca_eval/gpt4_1106_preview_concise.json", "{D}/alpaca_eval/gpt4_1106_preview_verbose.json"]),
    ("", ["import", "alpaca-eval", "{D}/alpaca_eval/results"]),
    ("local judge", ["lengths", "--tokenizer", "smollm2"]),
    ("local judge", ["rate", "--local", "smollm2", "--prompt", "pointwise_fewshot_v1", "--task-family", "alpaca_eval",
               "--model-filter", "gpt4_1106_preview_*", "--items", "4"]),
    ("local judge", ["rate", "--local", "smollm2", "--prompt", "pointwise_fewshot_v1", "--task-family", "llmbar/Natural",
                     "--items", "14"]),
    ("", ["stats"]),
    ("", ["fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4", "--bootstrap", "20", "--seed", "0"]),
    ("", ["fit", "--task-family", "llmbar/Natural", "--judge", "ChatGPT", "--bootstrap", "20", "--seed", "0"]),
    ("local judge", ["fit", "--task-family", "llmbar/Natural", "--judge", "smollm2-135m-instruct", "--verbosity-family",
                     "alpaca_eval", "--bootstrap", "20", "--seed", "0"]),
    ("", ["report", "--out", "{OUT}/report", "--bootstrap", "50"]),
    ("local judge", ["leaderboard", "--judge", "smollm2-135m-instruct", "--task-family", "alpaca_eval", "--task-family",
               "llmbar/Natural", "--calibration-from", "llmbar/Natural", "--bootstrap", "50"]),
    ("", ["leaderboard", "--baseline", "gpt4_1106_preview", "--task-family", "alpaca_eval", "--lc-weights",
          "{D}/alpaca_eval/length_controlled_v1_weights.csv", "--compare-to", "{D}/alpaca_eval/leaderboard.csv",
          "--compare-column", "length_controlled_winrate", "--bootstrap", "50"]),
    ("may fail", ["check", "--judge", "GPT-4", "--max-verbosity-winrate", "0.55", "--min-agreement-gain", "-0.05"]),
    ("model", ["mc", "score", "--model", "smollm2", "--task", "{D}/mc/arc_easy.jsonl", "--limit", "20"]),
]


def run_main(argv: list[str]) -> tuple[int, str]:
    """(exit status, stdout + stderr) of ``judgecal ARGV`` run in-process through its entry point."""
    from click.testing import CliRunner

    from judgecal.cli import main

    with CliRunner().isolation() as streams:
        code = 0
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return code, streams[0].getvalue().decode() + streams[1].getvalue().decode()


def build_demo(url: str, data_dir: Path, out: Path, *, model: bool, local_judge: bool = False) -> dict:
    """Run :data:`DEMO_STEPS` in-process through judgecal's entry point into the database at
    ``url`` (``model``: also the mc step, which needs the local model; ``local_judge``: also the
    local judge's steps). A step that fails, other than those the demo itself lets fail, raises
    AssertionError with its output. Returns {"url", "out", "ran": [step names], "skipped": [...]}."""
    out.mkdir(parents=True, exist_ok=True)
    ran, skipped = [], []
    for kind, args in DEMO_STEPS:
        argv = ["--database-url", url] + [a.replace("{D}", str(data_dir)).replace("{OUT}", str(out)) for a in args]
        name = " ".join(args[:2])
        if (kind == "model" and not model) or (kind == "local judge" and not (model and local_judge)):
            skipped.append(name)
            continue
        t0 = time.monotonic()
        code, text = run_main(argv)
        if os.environ.get("JUDGECAL_DEMO_TIMES"):
            print(f"demo step {name}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
        assert "Traceback" not in text, (name, text[-3000:])
        assert code == 0 or kind == "may fail", (name, code, text[-3000:])
        ran.append(name)
    return {"url": url, "out": out, "ran": ran, "skipped": skipped}


def demo_like_db(tmp_path_factory, data_dir: Path) -> dict:
    """The ``make demo`` database (:func:`build_demo`, SQLite), built once per test process; the
    mc step runs where the model is pulled, the local judge's steps only with
    ``JUDGECAL_DEMO_LOCAL_JUDGE=1`` (minutes)."""
    if "demo" not in _cache:
        from judgecal import config

        folder = tmp_path_factory.mktemp("make_demo")
        model = (config.default_model_dir() / "config.json").is_file()
        _cache["demo"] = build_demo(f"sqlite:///{folder / 'judgecal.db'}", data_dir, folder / "out", model=model,
                                    local_judge=os.environ.get("JUDGECAL_DEMO_LOCAL_JUDGE") == "1")
    return _cache["demo"]


# ---------------------------------------------------------------- the team's database
#: A model name of 175 characters (the importer accepts 200) and one with a right-to-left
#: override (U+202E), as a shared database ends up holding them (issue 32).
LONG_MODEL = "a-very-long-model-name-" + "x" * 140 + "-v2-final-rlhf"
RLO_MODEL = "evil\u202egnp.exe-model"


def team_records() -> dict[str, list[dict]]:
    """Generic-format records added to the demo database to make it a team's: one rating by a
    second judge named "GPT-4" (another identity: its own endpoint), and AlpacaEval-family
    verdicts of the real judge for two hostile model names against gpt4_1106_preview."""
    rating = {"prompt": "Write a haiku about rain.", "model": "team-model", "response": "Rain on the tin roof.",
              "judge": "GPT-4", "judge_model": "gpt-4-0613", "judge_endpoint": "https://api.example.org/v1",
              "scale_min": 1, "scale_max": 10, "score": 7, "raw_output": "Rating: [[7]]"}
    return {"ratings": [rating]}


TEAM_STEPS: list[tuple[str, list[str]]] = [
    ("", ["import", "llmbar", "{D}/llmbar_repo"]),
    ("", ["import", "jsonl", "{WORK}/team_ratings.jsonl", "--kind", "ratings", "--task-family", "team/haiku"]),
    ("", ["fit", "--task-family", "llmbar/Natural", "--judge", "GPT-4", "--bootstrap", "20", "--seed", "0"]),
]


def build_team(url: str, data_dir: Path, out: Path) -> dict:
    """The team's database (issue 32): :data:`DEMO_STEPS` (without the model steps), then
    :data:`TEAM_STEPS`: the LLMBar repository layout (58 judge/protocol pairs), a second judge
    named "GPT-4", long and bidi model names."""
    built = build_demo(url, data_dir, out, model=False)
    work = out / "team"
    work.mkdir(parents=True, exist_ok=True)
    for kind, recs in team_records().items():
        (work / f"team_{kind}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    texts = []
    for _, args in TEAM_STEPS:
        argv = ["--database-url", url] + [a.replace("{D}", str(data_dir)).replace("{WORK}", str(work)) for a in args]
        code, text = run_main(argv)
        assert "Traceback" not in text and code == 0, (args, code, text[-3000:])
        texts.append(text)
    _add_named_models(url, data_dir)
    built["team_output"] = texts
    return built


def _add_named_models(url: str, data_dir: Path) -> None:
    """Copies of one AlpacaEval model's answers and the real judge's verdicts under
    :data:`LONG_MODEL` and :data:`RLO_MODEL` (as an import of a renamed results folder stores them)."""
    from judgecal.views import importing

    src = data_dir / "alpaca_eval" / "results" / "alpaca-7b"
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name in (LONG_MODEL, RLO_MODEL):
            dst = Path(tmp) / "results" / name.replace("/", "_")
            shutil.copytree(src, dst)
            for f in dst.rglob("*.json"):
                text = f.read_text(encoding="utf-8").replace('"alpaca-7b"', json.dumps(name))
                f.write_text(text, encoding="utf-8")
        importing.import_alpaca_eval([Path(tmp) / "results" / n for n in (LONG_MODEL, RLO_MODEL)], [], None, url)


def team_db(tmp_path_factory, data_dir: Path) -> dict:
    """The team's database (:func:`build_team`, SQLite), built once per test process."""
    if "team" not in _cache:
        folder = tmp_path_factory.mktemp("team")
        _cache["team"] = build_team(f"sqlite:///{folder / 'judgecal.db'}", data_dir, folder / "out")
    return _cache["team"]
