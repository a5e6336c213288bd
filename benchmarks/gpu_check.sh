#!/usr/bin/env bash
# GPU check of the multiple-choice scorer (issue 5): on a CUDA machine,
#  1. float32 on the first 200 ARC-Easy items with --device cuda, compared per choice with the
#     same items scored on the CPU (parity within 1e-3 nats per choice, identical predictions);
#  2. bfloat16 on all of HellaSwag (10042 items) with --device cuda; prints items/s;
#  3. (issue 13) lm-eval's shipped arc_challenge config, 25-shot, in bfloat16 on CUDA
#     (${ARC_ITEMS:-300} items of the ARC-Challenge layout that tests/test_mc_lmeval_layout.py
#     builds from ../shared/data/mc), through `judgecal mc score --task arc_challenge
#     --num-fewshot 25 --data-dir`; prints items/s. Skipped (said so) when lm-eval is absent.
#
#   benchmarks/gpu_check.sh            (results as JSON under ${OUT:-/tmp}/gpu_check)
#
# Needs: .venv with judgecal[local] (and judgecal[lmeval] for step 3) and a CUDA build of torch,
# the model folder from `judgecal model pull`, ../shared/data. Exit status 1 when parity fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORK=${OUT:-/tmp}/gpu_check
mkdir -p "$WORK"
export JUDGECAL_DATABASE_URL="sqlite:///$WORK/gpu_check.db"
rm -f "$WORK/gpu_check.db"
DATA=../shared/data/mc
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
$PY -m judgecal mc score --model smollm2 --task $DATA/arc_easy.jsonl --limit 200 --device cpu --format json > "$WORK/arc_cpu.json"
$PY -m judgecal mc score --model smollm2 --task $DATA/arc_easy.jsonl --limit 200 --device cuda --format json > "$WORK/arc_cuda.json"
$PY -m judgecal mc score --model smollm2 --task $DATA/hellaswag_val_full.txt.bz2 --device cuda --dtype bfloat16 --format json > "$WORK/hellaswag_cuda_bf16.json"
if $PY -c "import lm_eval" 2>/dev/null; then
  HUB="$WORK/hub"
  rm -rf "$HUB"
  $PY -c "import sys; sys.path.insert(0, 'tests'); from pathlib import Path; from test_mc_lmeval_layout import build_hub_mirror; build_hub_mirror(Path(sys.argv[1]))" "$HUB"
  $PY -m judgecal mc score --model smollm2 --task arc_challenge --num-fewshot 25 --data-dir "$HUB" \
      --limit "${ARC_ITEMS:-300}" --device cuda --dtype bfloat16 --format json > "$WORK/arc_challenge_25shot_cuda_bf16.json"
else
  echo "lm-eval is not installed: ARC-Challenge 25-shot (lm-eval config) skipped; pip install 'judgecal[lmeval]'"
fi
$PY - "$WORK" <<'PYEOF'
import json, os, sys
from judgecal.views import mc
work = sys.argv[1]
arc25 = f"{work}/arc_challenge_25shot_cuda_bf16.json"
if os.path.exists(arc25):
    r = json.load(open(arc25))
    print(f"arc_challenge 25-shot cuda bf16: {r['n_items']} items, {r['stats']['items_per_s']:.1f} items/s "
          f"(model pass {r['n_items'] / r['stats']['scoring_seconds']:.1f} items/s), "
          + ", ".join(f"{m} {v['value']:.4f}" for m, v in r["metrics"].items()))
runs = {k: json.load(open(f"{work}/{k}.json")) for k in ("arc_cpu", "arc_cuda", "hellaswag_cuda_bf16")}
cpu, gpu = (mc.load_run(runs[k]["run_id"]) for k in ("arc_cpu", "arc_cuda"))
worst, same = 0.0, True
for a, b in zip(cpu["items"], gpu["items"]):
    for ca, cb in zip(a["choices"], b["choices"]):
        worst = max(worst, abs(ca["ll"] - cb["ll"]))
    same &= a["pred_acc"] == b["pred_acc"] and a["pred_acc_norm"] == b["pred_acc_norm"]
for k, r in runs.items():
    print(f"{k}: {r['n_items']} items, {r['stats']['items_per_s']:.1f} items/s, "
          + ", ".join(f"{m} {v['value']:.4f}" for m, v in r["metrics"].items()))
print(f"ARC-Easy float32 cuda vs cpu: max |delta ll| = {worst:.2e} nats, identical predictions: {same}")
sys.exit(0 if worst <= 1e-3 and same else 1)
PYEOF
