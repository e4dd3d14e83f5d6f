# Quick start: `make reproduce` (the default workflow) and `make test`.
VENV ?= .venv
PYTHON ?= python3
CORES ?= 2
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: venv reproduce test test-fast lint bench clean

$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install -r requirements.txt -c constraints.txt
	$(BIN)/pip install --no-deps --no-build-isolation -e . || $(BIN)/pip install --no-deps -e .
	touch $@

venv: $(VENV)/.installed

reproduce: venv
	$(BIN)/snakemake --cores $(CORES)

test: venv
	$(BIN)/snakemake --lint
	$(BIN)/python -m pytest -q

test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow"

lint: venv
	$(BIN)/snakemake --lint

bench: venv
	$(BIN)/python benchmarks/bench_model_module.py
	$(BIN)/python benchmarks/bench_snakemake_noop.py

clean:
	rm -rf results logs .snakemake
