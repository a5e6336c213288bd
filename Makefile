# judgecal: `make demo` runs the main job on real input; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
JC := $(VENV)/bin/judgecal
DATA ?= $(or $(JUDGECAL_SHARED_DATA),../shared/data)
DEMO_DIR ?= out/demo
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: venv model test test-fast long demo bench clean chromium results results-check

venv: $(VENV)/.installed

# torch 2.13.0 first: the CPU build on this machine's disk (no multi-GB CUDA download).
# llama-cpp-python is compiled here (about 8 minutes on 2 cores) for any x86-64, never from pip's wheel
# cache: a wheel built with -march=native on another CPU crashed here (AMX/AVX-512 kernels, SIGSEGV).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq torch==2.13.0
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install -qq --no-cache-dir 'llama-cpp-python[server]==0.3.36'
	$(PY) -m pip install -qq -e '.[local,test,llamacpp]'
	touch $@

model: venv
	$(JC) model pull

# Headless Chromium for the HTML report screenshot test (Debian packages).
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) || echo "chromium could not be installed"

test: venv model chromium
	$(VENV)/bin/pytest -q -ra -m "not long"

# The long parity and end-to-end runs (few-shot lm-eval parity of arc/hellaswag/piqa/winogrande,
# the 57-subject MMLU group, float64 reference, make demo on PostgreSQL): CI runs them after make test.
long: venv model chromium
	$(VENV)/bin/pytest -q -ra -m long

test-fast: venv
	$(VENV)/bin/pytest -q -m "not slow and not long"

# The main job on real input, into a fresh SQLite database under $(DEMO_DIR):
# import the real data sets, rate a real subset with the local model served by
# `transformers serve` (started and stopped by judgecal), fit, report, leaderboard, gate, mc.
DEMO_ITEMS_ALPACA ?= 30
DEMO_ITEMS_LLMBAR ?= 40
DEMO_MC_LIMIT ?= 100
demo: export JUDGECAL_DATABASE_URL ?= sqlite:///$(abspath $(DEMO_DIR))/judgecal.db
# one refresh of the stored results at the end (docs/serve.md, "Results computed ahead"), not one per step
demo: export JUDGECAL_NO_REFRESH = 1
demo: venv model
	mkdir -p $(DEMO_DIR)
	case "$$JUDGECAL_DATABASE_URL" in sqlite:*) rm -f $(DEMO_DIR)/judgecal.db*;; esac
	$(JC) db upgrade
	$(JC) import llmbar $(DATA)/llmbar/Natural
	$(JC) import llmbar $(DATA)/llmbar/Adversarial_Neighbor
	$(JC) import llmbar $(DATA)/llmbar/Adversarial_GPTInst
	$(JC) import pandalm $(DATA)/pandalm/testset-v1.json
	$(JC) import alpaca-eval $(DATA)/alpaca_eval/gpt4_1106_preview.json \
	    --pair $(DATA)/alpaca_eval/gpt4_1106_preview_concise.json $(DATA)/alpaca_eval/gpt4_1106_preview_verbose.json
	$(JC) import alpaca-eval $(DATA)/alpaca_eval/results
	$(JC) lengths --tokenizer smollm2
	$(JC) rate --serve smollm2 --judge smollm2 --prompt pointwise_fewshot_v1 --max-tokens 8 --concurrency 4 --timeout 120 \
	    --task-family alpaca_eval --model-filter 'gpt4_1106_preview_*' --items $(DEMO_ITEMS_ALPACA)
	$(JC) rate --serve smollm2 --judge smollm2 --prompt pointwise_fewshot_v1 --max-tokens 8 --concurrency 4 --timeout 120 \
	    --task-family llmbar/Natural --items $(DEMO_ITEMS_LLMBAR)
	$(JC) stats
	for fam in llmbar/Natural llmbar/Adversarial_Neighbor llmbar/Adversarial_GPTInst; do \
	  for judge in GPT-4 ChatGPT; do \
	    $(JC) fit --task-family $$fam --judge $$judge --bootstrap 500 --seed 0 || exit 1; \
	  done; \
	done
	$(JC) fit --task-family llmbar/Natural --judge smollm2-135m-instruct --verbosity-family alpaca_eval \
	    --bootstrap 500 --seed 0 || echo "demo: the local judge's ratings could not be fitted (see the message above)"
	$(JC) report --out $(DEMO_DIR)/report
	$(JC) leaderboard --judge smollm2-135m-instruct --task-family alpaca_eval --task-family llmbar/Natural \
	    --calibration-from llmbar/Natural
	$(JC) leaderboard --baseline gpt4_1106_preview --task-family alpaca_eval \
	    --lc-weights $(DATA)/alpaca_eval/length_controlled_v1_weights.csv \
	    --compare-to $(DATA)/alpaca_eval/leaderboard.csv --compare-column length_controlled_winrate
	$(JC) check --judge GPT-4 --max-verbosity-winrate 0.55 --min-agreement-gain -0.05 \
	    || echo "demo: judgecal check failed a threshold (exit status $$?): a release would stop here"
	$(JC) mc score --model smollm2 --task $(DATA)/mc/arc_easy.jsonl --limit $(DEMO_MC_LIMIT)
	$(JC) db refresh
	@echo "demo: HTML report in $(DEMO_DIR)/report/report.html"

# docs/results.md, generated from the current code on the real data (fresh SQLite database in a
# temporary folder; LLMBar fits, transfers, AlpacaEval win rates): never edited by hand.
# results-check regenerates it and fails with a diff when docs/results.md is not what the code gives.
results: venv model
	$(PY) benchmarks/results.py --data $(DATA) --out docs/results.md

results-check: venv model
	$(PY) benchmarks/results.py --data $(DATA) --check docs/results.md

bench: venv model
	$(PY) benchmarks/bench_import.py

clean:
	rm -rf $(VENV) dist build out .pytest_cache
