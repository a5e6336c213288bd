"""The database the ``judgecal serve`` tests browse (tests/test_serve.py, tests/test_serve_browser.py):
real data (LLMBar Natural's GPT-4 and ChatGPT ratings with the expert labels; three models'
AlpacaEval annotations against gpt4_1106_preview), one nested-CV calibration of GPT-4 (its
advice is "keep raw"), a hostile task family whose model names, answers, judge names and judge
outputs are HTML/script injections, and two multiple-choice runs (stored rows: no model is
loaded). Built once per test process."""

from __future__ import annotations

import json
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
