"""AlpacaEval's reference data packaged with judgecal (judgecal/data/alpaca_eval, Apache-2.0,
tatsu-lab/alpaca_eval; README.md there says what each file is and where it comes from): the
published ``length_controlled_v1`` GLM weights (whose rows for the gamed baselines make the
regulariser) and, per AlpacaEval 2.0 instruction, a fixed difficulty and the lengths of the
baseline's and the gamed baselines' answers. Read once per process."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

BASELINE = "gpt4_1106_preview"
#: AlpacaEval 2.0's annotator, whose verdicts the packaged weights were fitted on
JUDGE = "weighted_alpaca_eval_gpt4_turbo"
GAMED = (BASELINE + "_verbose", BASELINE + "_concise")
SOURCE = ("AlpacaEval's published length_controlled_v1 weights of the gamed baselines gpt4_1106_preview_verbose and "
          "gpt4_1106_preview_concise (tatsu-lab/alpaca_eval, Apache-2.0; packaged with judgecal)")
WEIGHTS_FILE = "length_controlled_v1_baseline_gpt4_1106_preview.csv"


def data_dir() -> Path:
    return Path(str(resources.files("judgecal") / "data" / "alpaca_eval"))


@dataclass(frozen=True)
class Instructions:
    """Per AlpacaEval instruction (by prompt SHA-256): its position in AlpacaEval's set, the
    packaged difficulty, and the lengths in characters of the baseline's and the gamed
    baselines' answers (``lengths[model]``)."""

    index: dict[str, int]
    difficulty: dict[str, float]
    lengths: dict[str, dict[str, int]]


@lru_cache(maxsize=1)
def instructions() -> Instructions:
    index, diff, lengths = {}, {}, {m: {} for m in (BASELINE, *GAMED)}
    with open(data_dir() / "instructions.csv", newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            key = r["prompt_sha256"]
            index[key] = int(r["index"])
            diff[key] = float(r["instruction_difficulty"])
            for m in lengths:
                if r[f"len_{m}"]:
                    lengths[m][key] = int(r[f"len_{m}"])
    return Instructions(index, diff, lengths)


@lru_cache(maxsize=1)
def packaged_weights_path() -> Path:
    return data_dir() / WEIGHTS_FILE
