"""Regenerate judgecal's packaged AlpacaEval reference (judgecal/data/alpaca_eval/) from the
public AlpacaEval files in ../shared/data/alpaca_eval (Apache-2.0, tatsu-lab/alpaca_eval).

Writes:
- ``length_controlled_v1_baseline_gpt4_1106_preview.csv``: AlpacaEval's published GLM weights
  (``src/alpaca_eval/metrics/weights/weighted_alpaca_eval_gpt4_turbo/length_controlled_v1/
  baseline_gpt4_1106_preview.csv``), copied byte for byte;
- ``instructions.csv``: one row per AlpacaEval 2.0 instruction (the order of
  ``gpt4_1106_preview.json``): ``index``, ``prompt_sha256`` (SHA-256 of the instruction's UTF-8
  text: judgecal's item key), ``instruction_difficulty`` (see below) and the length in
  characters of the answers of ``gpt4_1106_preview``, ``gpt4_1106_preview_verbose`` and
  ``gpt4_1106_preview_concise`` (AlpacaEval's gamed baselines; from their model_outputs.json);
- ``LICENSE``: AlpacaEval's Apache-2.0 licence.

The instruction difficulty: AlpacaEval downloads its own (``instruction_difficulty.csv``, Hugging
Face Hub) at run time. judgecal derives one from public files only: with the published GLM
weights of every shared model held fixed, each instruction's difficulty maximises the likelihood
of those models' verdicts on it (:func:`judgecal.calibrate.glm_lc.difficulty_from_weights`).

    .venv/bin/python benchmarks/make_alpaca_eval_data.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from judgecal.calibrate import glm_lc

OUT = Path(__file__).resolve().parents[1] / "judgecal" / "data" / "alpaca_eval"
BASELINE = "gpt4_1106_preview"
WEIGHTS = "length_controlled_v1_weights.csv"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("JUDGECAL_SHARED_DATA", "../shared/data"))
    args = ap.parse_args()
    ae = Path(args.data) / "alpaca_eval"
    outputs = {v: json.loads((ae / f"{BASELINE}{v}.json").read_text(encoding="utf-8")) for v in ("", "_verbose", "_concise")}
    order = [r["instruction"] for r in outputs[""]]
    index = {s: i for i, s in enumerate(order)}
    lengths = {v: {r["instruction"]: len(r["output"]) for r in recs} for v, recs in outputs.items()}
    with open(ae / WEIGHTS, newline="") as fh:
        weights = {r[""]: [float(x) for x in list(r.values())[1:4]] for r in csv.DictReader(fh)}
    items, models, prefs, tanh, wrows = [], [], [], [], []
    for f in sorted((ae / "results").glob("*/weighted_alpaca_eval_gpt4_turbo/annotations.json")):
        name = f.parent.parent.name
        if name == BASELINE or name not in weights:
            continue
        recs = [r for r in json.loads(f.read_text(encoding="utf-8")) if r.get("preference") is not None]
        p = np.array([float(r["preference"]) for r in recs])
        p = np.where(p == 0, 1.5, p) - 1
        t = glm_lc.std_delta_len([len(r["output_2"]) for r in recs], [len(r["output_1"]) for r in recs])
        items.append([index[r["instruction"]] for r in recs])
        models.append(np.full(len(recs), len(wrows)))
        prefs.append(p), tanh.append(t), wrows.append(weights[name])
    d = glm_lc.difficulty_from_weights(np.concatenate(items), np.concatenate(models), np.concatenate(prefs),
                                       np.concatenate(tanh), np.array(wrows), len(order))
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "instructions.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["index", "prompt_sha256", "instruction_difficulty", f"len_{BASELINE}", f"len_{BASELINE}_verbose",
                    f"len_{BASELINE}_concise"])
        for i, s in enumerate(order):
            w.writerow([i, hashlib.sha256(s.encode("utf-8")).hexdigest(), f"{d[i]:.10f}", lengths[""][s],
                        lengths["_verbose"].get(s, ""), lengths["_concise"].get(s, "")])
    shutil.copyfile(ae / WEIGHTS, OUT / "length_controlled_v1_baseline_gpt4_1106_preview.csv")
    shutil.copyfile(ae / "LICENSE", OUT / "LICENSE")
    print(f"wrote {OUT}: {len(order)} instructions, difficulty from {len(wrows)} models' verdicts and published weights")


if __name__ == "__main__":
    main()
