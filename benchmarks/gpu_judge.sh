#!/usr/bin/env bash
# Serve the pulled SmolLM2 judge on a CUDA GPU with `transformers serve --device cuda` and rate
# 500 real responses (AlpacaEval outputs from ../shared/data) through `judgecal rate`, then the
# same 500 against a CPU server for comparison; prints ratings/s for both (JSON summaries).
#
#   benchmarks/gpu_judge.sh [N=500] [CONCURRENCY=32]
#
# Needs: .venv with judgecal[local] (torch with CUDA), the model folder from
# `judgecal model pull`, ../shared/data. Writes a fresh SQLite database under $OUT (or /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500}
CONC=${2:-32}
PY=${PY:-.venv/bin/python}
TF=${TF:-.venv/bin/transformers}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORK=${OUT:-/tmp}/gpu_judge
mkdir -p "$WORK"
MODEL=$($PY -c 'from judgecal import config; print(config.default_model_dir())')
[ -f "$MODEL/config.json" ] || { echo "model folder $MODEL missing: run judgecal model pull" >&2; exit 2; }
DATA=../shared/data/alpaca_eval
export JUDGECAL_DATABASE_URL="sqlite:///$WORK/gpu_judge.db"
rm -f "$WORK/gpu_judge.db"
$PY -m judgecal import alpaca-eval "$DATA/gpt4_1106_preview.json" --task-family gpu/alpaca_eval >/dev/null

serve_and_rate() {  # $1 device, $2 port
  local dev=$1 port=$2
  $TF serve "$MODEL" --device "$dev" --dtype auto --host 127.0.0.1 --port "$port" >"$WORK/serve_$dev.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 180); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 1
  done
  local n=$N
  [ "$dev" = cpu ] && n=${CPU_N:-50}   # the CPU server is slow: a smaller sample gives its rate
  $PY -m judgecal rate --judge "$MODEL" --base-url "http://127.0.0.1:$port/v1" --task-family gpu/alpaca_eval \
      --limit "$n" --concurrency "$CONC" --max-tokens 128 --format json >"$WORK/rate_$dev.json" || true
  kill "$pid"; wait "$pid" 2>/dev/null || true
  $PY - "$dev" "$WORK/rate_$dev.json" <<'PYEOF'
import json, sys
dev, path = sys.argv[1], sys.argv[2]
text = open(path).read()
s = json.loads(text[text.index("{"):])
print(f"{dev}: {sum(v for k, v in s['this_run'].items() if k != 'attempts')} ratings, "
      f"{s['ratings_per_s']} ratings/s, this run {s['this_run']}")
PYEOF
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
serve_and_rate cuda 8011
serve_and_rate cpu 8012
