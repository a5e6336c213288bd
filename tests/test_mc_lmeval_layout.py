"""Local copies of real data in the layouts lm-evaluation-harness's shipped task configs expect.

The real multiple-choice files in ../shared/data/mc (llm-foundry JSONL, the HellaSwag text
format) are converted into local copies of the Hugging Face Hub dataset folders that lm-eval
0.4.13's shipped configs name in ``dataset_path`` (``allenai/ai2_arc``, ``Rowan/hellaswag``,
``baber/piqa``, ``aps/super_glue``, ``cais/mmlu``, ``allenai/winogrande``): a folder per
dataset with a ``README.md`` whose YAML header lists the configs and their split files
(JSON lines), as on the Hub. ``build_hub_mirror(root)`` writes them all under
``root/<owner>/<name>``, which is what ``judgecal mc score --data-dir root`` reads.

Where the real data lacks something the layout needs, it is built and said so here:

- ARC: the file is ARC-Easy's test split (2376 items); "test" = its first 300 items, "train"
  = the next 500, "validation" = the next 100. ARC-Challenge has the same shape; its layout is
  built from other ARC-Easy items (900-1399 train, 1400-1699 test), since there is no
  ARC-Challenge data here. Choice labels are "A".."D"; every 7th item uses "1".."4", as some
  real ARC items do.
- HellaSwag: the text format joins ``ctx_a + " " + ctx_b``; ``ctx_b`` is recovered as the
  final lower-case fragment after the last sentence end (judgecal.loglik.tasks.hellaswag_query's
  rule), ``label`` is a string as on the Hub. "validation" = items 0-299, "train" = 300-799.
- PIQA: ``goal`` from the query (``"Question: " + goal + "\\n"``), ``sol1``/``sol2``,
  ``label``. "validation" = 0-299, "train" = 300-799.
- COPA: ``premise`` = the query's text before ", because"/", therefore" plus ".", ``question``
  cause/effect from the connector, ``choice1``/``choice2`` with the first letter upper-cased
  (lm-eval lower-cases it again). 100 items: "validation" = 0-59, "train" = 60-99.
- MMLU: there is no MMLU data here. A tiny MMLU-format dataset is built from ARC-Easy items
  (``question``, ``subject``, ``choices`` (4), ``answer`` index): for each of lm-eval's 57
  subjects, "test" = 1 to 3 items (1 + subject index mod 3, so that the group's size weighting
  matters) and "dev" = 5 items (different ARC items per subject), so the prompts, letter
  choices, first_n few-shot sampling and the group's size-weighted average are MMLU's while the
  questions are ARC's.
- WinoGrande: no data here; ``WINOGRANDE_ROWS`` are hand-written items in the real
  ``sentence``/``option1``/``option2``/``answer`` shape (one "_" to fill, answer "1"/"2").
"""

from __future__ import annotations

import bz2
import json
import re
from pathlib import Path

import pytest

from judgecal.config import shared_data_dir

DATA = shared_data_dir() / "mc"

MMLU_SUBJECTS = [
    "abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge", "college_biology",
    "college_chemistry", "college_computer_science", "college_mathematics", "college_medicine", "college_physics",
    "computer_security", "conceptual_physics", "econometrics", "electrical_engineering", "elementary_mathematics",
    "formal_logic", "global_facts", "high_school_biology", "high_school_chemistry", "high_school_computer_science",
    "high_school_european_history", "high_school_geography", "high_school_government_and_politics",
    "high_school_macroeconomics", "high_school_mathematics", "high_school_microeconomics", "high_school_physics",
    "high_school_psychology", "high_school_statistics", "high_school_us_history", "high_school_world_history",
    "human_aging", "human_sexuality", "international_law", "jurisprudence", "logical_fallacies", "machine_learning",
    "management", "marketing", "medical_genetics", "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition",
    "philosophy", "prehistory", "professional_accounting", "professional_law", "professional_medicine",
    "professional_psychology", "public_relations", "security_studies", "sociology", "us_foreign_policy", "virology",
    "world_religions",
]

WINOGRANDE_ROWS = [
    {"sentence": "The trophy doesn't fit into the brown suitcase because the _ is too large.",
     "option1": "trophy", "option2": "suitcase", "answer": "1"},
    {"sentence": "The trophy doesn't fit into the brown suitcase because the _ is too small.",
     "option1": "trophy", "option2": "suitcase", "answer": "2"},
    {"sentence": "Sarah lent her umbrella to Maria because _ had forgotten hers at home.",
     "option1": "Sarah", "option2": "Maria", "answer": "2"},
    {"sentence": "The bread was still warm when Tom ate it, because the _ had just come out of the oven.",
     "option1": "bread", "option2": "Tom", "answer": "1"},
    {"sentence": "Kevin had to call a plumber instead of Robert because _ knew nothing about pipes.",
     "option1": "Kevin", "option2": "Robert", "answer": "1"},
    {"sentence": "The cat chased the mouse until the _ was too tired to keep running away.",
     "option1": "cat", "option2": "mouse", "answer": "2"},
    {"sentence": "Emily always beat Jessica at chess, since _ had played the game since childhood.",
     "option1": "Emily", "option2": "Jessica", "answer": "1"},
    {"sentence": "The ice melted faster on the table than in the freezer because the _ was warmer.",
     "option1": "table", "option2": "freezer", "answer": "1"},
    {"sentence": "Lisa asked Rachel to proofread the essay because _ was a careful reader.",
     "option1": "Lisa", "option2": "Rachel", "answer": "2"},
    {"sentence": "The nail went into the wood easily but not into the stone, as the _ was too hard.",
     "option1": "wood", "option2": "stone", "answer": "2"},
    {"sentence": "Mark paid for dinner because Steven had left _ wallet in the car.",
     "option1": "Mark's", "option2": "Steven's", "answer": "2"},
    {"sentence": "The plant on the windowsill grew taller than the one in the hall because the _ got more light.",
     "option1": "windowsill", "option2": "hall", "answer": "1"},
]


def model_folder_or_skip() -> Path:
    """The pulled SmolLM2 folder; skips (with the reason) when it or the real data folder is absent."""
    import pytest

    from judgecal import config
    from judgecal.localmodel import is_complete

    f = config.default_model_dir()
    if not is_complete(f):
        pytest.skip(f"SmolLM2 folder missing at {f}: run `judgecal model pull`")
    if not DATA.exists():
        pytest.skip(f"real data folder absent: {DATA}")
    return f


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _dataset(folder: Path, configs: dict[str, dict[str, list[dict]]]) -> Path:
    """Write a local Hub dataset folder: ``configs`` maps config name -> split -> rows."""
    lines = ["---", "configs:"]
    for cfg, splits in configs.items():
        lines += [f"- config_name: {cfg}", "  data_files:"]
        for split, rows in splits.items():
            rel = f"{cfg}/{split}.jsonl"
            _jsonl(folder / rel, rows)
            lines += [f"  - split: {split}", f"    path: {rel}"]
    lines += ["---", "", f"Local copy built by tests/test_mc_lmeval_layout.py from ../shared/data/mc.", ""]
    (folder / "README.md").write_text("\n".join(lines), encoding="utf-8")
    return folder


def _read_jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def arc_rows(records: list[dict], start: int = 0) -> list[dict]:
    """ARC Hub rows (id, question, choices {text, label}, answerKey) from llm-foundry records."""
    out = []
    for k, r in enumerate(records):
        q = r["query"]
        q = q[len("Question: "):] if q.startswith("Question: ") else q
        labels = ["1", "2", "3", "4"] if (start + k) % 7 == 6 else ["A", "B", "C", "D"]
        labels = labels[:len(r["choices"])]
        out.append({"id": f"arc_{start + k}", "question": q,
                    "choices": {"text": r["choices"], "label": labels}, "answerKey": labels[r["gold"]]})
    return out


def hellaswag_rows(lines: list[str], start: int, n: int) -> list[dict]:
    """Rowan/hellaswag rows from the 6-line text format (ctx_a/ctx_b split as documented above)."""
    out = []
    for i in range(start, start + n):
        block = lines[6 * i:6 * i + 6]
        activity, _, ctx = block[0].partition(": ")
        m = re.match(r"^(.*[.!?] )?([a-z].*)$", ctx, re.S)
        if m:
            ctx_a, ctx_b = (m.group(1) or "").rstrip(" "), m.group(2)
        else:
            ctx_a, ctx_b = ctx, ""
        out.append({"ind": i, "activity_label": activity, "ctx_a": ctx_a, "ctx_b": ctx_b, "ctx": ctx,
                    "endings": block[2:6], "source_id": f"hs_{i}", "split": "val", "split_type": "indomain",
                    "label": block[1].strip()})
    return out


def piqa_rows(records: list[dict]) -> list[dict]:
    out = []
    for r in records:
        goal = r["query"]
        goal = goal[len("Question: "):] if goal.startswith("Question: ") else goal
        goal = goal[:-1] if goal.endswith("\n") else goal
        out.append({"goal": goal, "sol1": r["choices"][0], "sol2": r["choices"][1], "label": r["gold"]})
    return out


def copa_rows(records: list[dict], start: int = 0) -> list[dict]:
    out = []
    for k, r in enumerate(records):
        m = re.match(r"^(.*), (because|therefore)$", r["query"])
        assert m, r["query"]
        premise, conn = m.group(1) + ".", m.group(2)
        c1, c2 = (c[:1].upper() + c[1:] for c in r["choices"])
        out.append({"premise": premise, "choice1": c1, "choice2": c2,
                    "question": "cause" if conn == "because" else "effect", "idx": start + k, "label": r["gold"]})
    return out


def mmlu_rows(records: list[dict], subject: str) -> list[dict]:
    out = []
    for r in records:
        q = r["query"]
        q = q[len("Question: "):] if q.startswith("Question: ") else q
        out.append({"question": q, "subject": subject, "choices": r["choices"], "answer": r["gold"]})
    return out


def build_hub_mirror(root: Path) -> Path:
    """Write every dataset folder above under ``root/<owner>/<name>``; returns ``root``."""
    arc = _read_jsonl("arc_easy.jsonl")
    _dataset(root / "allenai" / "ai2_arc", {
        "ARC-Easy": {"train": arc_rows(arc[300:800], 300), "validation": arc_rows(arc[800:900], 800),
                     "test": arc_rows(arc[:300], 0)},
        "ARC-Challenge": {"train": arc_rows(arc[900:1400], 900), "validation": arc_rows(arc[1700:1800], 1700),
                          "test": arc_rows(arc[1400:1700], 1400)},
    })
    with bz2.open(DATA / "hellaswag_val_full.txt.bz2", "rt", encoding="utf-8") as fh:
        hs = fh.read().split("\n")
    _dataset(root / "Rowan" / "hellaswag", {"default": {"train": hellaswag_rows(hs, 300, 500),
                                                         "validation": hellaswag_rows(hs, 0, 300)}})
    piqa = _read_jsonl("piqa.jsonl")
    _dataset(root / "baber" / "piqa", {"default": {"train": piqa_rows(piqa[300:800]),
                                                    "validation": piqa_rows(piqa[:300])}})
    copa = _read_jsonl("copa.jsonl")
    _dataset(root / "aps" / "super_glue", {"copa": {"train": copa_rows(copa[60:], 60),
                                                     "validation": copa_rows(copa[:60], 0)}})
    mmlu: dict[str, dict[str, list[dict]]] = {}
    for k, subject in enumerate(MMLU_SUBJECTS):
        base = 1800 + 8 * k  # 57 x 8 = 456 ARC items: 1800..2255
        mmlu[subject] = {"test": mmlu_rows(arc[base:base + 1 + k % 3], subject),
                         "dev": mmlu_rows(arc[base + 3:base + 8], subject)}
    _dataset(root / "cais" / "mmlu", mmlu)
    _dataset(root / "allenai" / "winogrande", {"winogrande_xl": {"train": WINOGRANDE_ROWS[4:],
                                                                  "validation": WINOGRANDE_ROWS[:4]}})
    return root


def build_mmlu_subject(root: Path, subject: str = "anatomy", n_test: int = 100, start: int = 1000) -> Path:
    """A larger single-subject MMLU-format copy for the benchmark (``root/cais/mmlu``, one config
    ``subject``): "test" = ``n_test`` ARC-Easy items from ``start``, "dev" = the 5 after them."""
    arc = _read_jsonl("arc_easy.jsonl")
    _dataset(root / "cais" / "mmlu", {subject: {"test": mmlu_rows(arc[start:start + n_test], subject),
                                                "dev": mmlu_rows(arc[start + n_test:start + n_test + 5], subject)}})
    return root


def build_datasets_cache(hub: Path, cache_dir: Path, repo_id: str = "allenai/ai2_arc", config: str = "ARC-Easy") -> Path:
    """A datasets cache that holds ``repo_id`` (config ``config``) as if it had been downloaded
    from the Hub: the local copy is prepared with ``cache_dir`` and its folder renamed to the
    Hub cache name (``owner___name``), which is where ``datasets.load_dataset(repo_id, config)``
    looks with ``HF_DATASETS_OFFLINE=1``. Returns ``cache_dir``."""
    import datasets

    owner, name = repo_id.split("/")
    datasets.load_dataset(str(hub / owner / name), config, cache_dir=str(cache_dir))
    (cache_dir / name).rename(cache_dir / f"{owner}___{name}")
    return cache_dir


needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"real data folder absent: {DATA}")


@needs_data
def test_hub_mirror_loads_with_datasets(tmp_path):
    """The folders load with the datasets library as the shipped configs ask (path, name, split)."""
    import datasets

    root = build_hub_mirror(tmp_path / "hub")
    arc = datasets.load_dataset(str(root / "allenai" / "ai2_arc"), "ARC-Easy")
    assert arc["test"].num_rows == 300 and arc["train"].num_rows == 500
    first = arc["test"][0]
    assert first["question"].startswith("Which statement best explains why photosynthesis")
    assert first["choices"]["label"] == ["A", "B", "C", "D"] and first["answerKey"] == "A"
    hs = datasets.load_dataset(str(root / "Rowan" / "hellaswag"))["validation"][0]
    assert (hs["activity_label"], hs["ctx_a"], hs["ctx_b"], hs["label"]) == (
        "Roof shingle removal", "A man is sitting on a roof.", "he", "3")
    copa = datasets.load_dataset(str(root / "aps" / "super_glue"), "copa")["validation"][0]
    assert (copa["premise"], copa["question"], copa["choice2"]) == (
        "The man turned on the faucet.", "effect", "Water flowed from the spout.")
    mm = datasets.load_dataset(str(root / "cais" / "mmlu"), "anatomy")
    assert mm["test"].num_rows == 2 and mm["dev"].num_rows == 5 and len(mm["dev"][0]["choices"]) == 4
