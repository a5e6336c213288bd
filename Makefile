# judgecal: `make demo` runs the main job on real input; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
JC := $(VENV)/bin/judgecal
DATA ?= ../shared/data
DEMO_DIR ?= out/demo
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: venv model test test-fast demo bench clean chromium

venv: $(VENV)/.installed

# torch 2.13.0 first: the CPU build on this machine's disk (no multi-GB CUDA download).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[local,test]'
	touch $@

model: venv
	$(JC) model pull

# Headless Chromium for the HTML report screenshot test (Debian packages).
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) || echo "chromium could not be installed"

test: venv model chromium
	$(VENV)/bin/pytest -q -ra

test-fast: venv
	$(VENV)/bin/pytest -q -m "not slow"

# The main job on real input, into a fresh SQLite database under $(DEMO_DIR).
demo: export JUDGECAL_DATABASE_URL := sqlite:///$(abspath $(DEMO_DIR))/judgecal.db
demo: venv model
	rm -f $(DEMO_DIR)/judgecal.db*
	mkdir -p $(DEMO_DIR)
	$(JC) db upgrade
	$(JC) import llmbar $(DATA)/llmbar/Natural
	$(JC) import llmbar $(DATA)/llmbar/Adversarial_Neighbor
	$(JC) import llmbar $(DATA)/llmbar/Adversarial_GPTInst
	$(JC) import pandalm $(DATA)/pandalm/testset-v1.json
	$(JC) import alpaca-eval $(DATA)/alpaca_eval/gpt4_1106_preview.json \
	    --pair $(DATA)/alpaca_eval/gpt4_1106_preview_concise.json $(DATA)/alpaca_eval/gpt4_1106_preview_verbose.json
	$(JC) lengths --tokenizer smollm2
	$(JC) stats

bench: venv model
	$(PY) benchmarks/bench_import.py

clean:
	rm -rf $(VENV) dist build out .pytest_cache
