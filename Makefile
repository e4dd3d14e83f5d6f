# Quick start: `make reproduce` (the default workflow) and `make test`.
VENV ?= .venv
PYTHON ?= python3
CORES ?= 2
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
export LITELLM_LOCAL_MODEL_COST_MAP := True
# llama.cpp built for a portable x86-64 (AVX2), not -march=native: a native build on a CPU with AMX
# (seen here: Sapphire Rapids in a sandbox) segfaults on the first completion of the Q4_1 model.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF

# The container image (Dockerfile) that profiles/kubernetes names; needs a Docker engine.
IMAGE ?= aura-eval:latest

.PHONY: venv image browser slurm reproduce simulate pack forecast status pilot preflight test test-fast test-e2e test-slurm lint bench clean

$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip -c constraints.txt
	$(BIN)/pip install -r requirements.txt -c constraints.txt
	$(BIN)/pip install --no-deps --no-build-isolation -e . || $(BIN)/pip install --no-deps -e .
	$(BIN)/python -m aura_eval.tools.check_local_model || { echo "the embedded model crashed: rebuild llama-cpp-python (pip cache remove llama_cpp_python; make venv)"; exit 1; }
	touch $@

venv: $(VENV)/.installed

image:
	docker build -t $(IMAGE) .

# Debian's Chromium and its driver, for the annotation-page test (needs root, as in CI).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)

# Debian's slurm-wlm, munge, slurmdbd and MariaDB, for the one-node SLURM of the cluster tests
# (tests/test_slurm.py starts it with scripts/slurm/cluster.sh; needs root, as in CI).
slurm:
	scripts/slurm/cluster.sh install

reproduce: venv
	$(BIN)/snakemake --cores $(CORES)

# The planted-truth simulation at the paper's scale (config/simulate.yaml), in its own working
# directory so that it never touches the default run's results/: simulation/results/report/.
SIM_DIR ?= simulation
simulate: venv
	mkdir -p $(SIM_DIR)
	for part in prompts data paper; do ln -sfn ../$$part $(SIM_DIR)/$$part; done
	$(BIN)/snakemake --cores $(CORES) --directory $(SIM_DIR) --configfile config/simulate.yaml

# A finished run as one archive (dataset, tables, report, response cache, config, MANIFEST of
# sha256 checksums, R-Judge's source note, the responses' terms); `python -m aura_eval unpack
# $(PACK) <checkout>` verifies it and prints the offline replay command. CONFIG: the run's config; left
# unset, pack and forecast take the config recorded with the results (results/run/config.yaml, written at
# each run's start; aura_eval/workflow/run_config.py), and pack refuses a CONFIG that differs from it.
PACK ?= aura-eval-run.tar.gz
CONFIG ?=
CONFIG_FLAG = $(if $(strip $(CONFIG)),--configfile $(CONFIG))
pack: venv
	$(BIN)/python -m aura_eval pack $(PACK) $(CONFIG_FLAG)

# Calls, tokens, dollars and the wall time the rate limits imply, per stage x model, before any call
# (from the config, and from results/ where intermediate files exist); also results/forecast/forecast.{csv,json}.
forecast: venv
	$(BIN)/python -m aura_eval forecast $(CONFIG_FLAG)

# A run while it goes (reads only): per stage x model the answers paid and their dollars, what is left as
# a band, the rate of the last ten minutes and the time left at it.
status: venv
	$(BIN)/python -m aura_eval status $(CONFIG_FLAG)

# The whole workflow on PILOT_SEEDS of the run's seeds in pilot/ (against the run's own cache, so the full
# run pays none of it again), after saying what it costs and asking; then the full run's forecast from it.
PILOT_SEEDS ?= 2
pilot: venv
	$(BIN)/python -m aura_eval pilot --seeds $(PILOT_SEEDS) $(CONFIG_FLAG)

# One tiny request per model entry in use (and a look at the batch API where `batch: true`): OK, or
# what is wrong and how to fix it; exits non-zero on any problem. Costs cents (the forecast says how much).
preflight: venv
	$(BIN)/python -m aura_eval preflight $(CONFIG_FLAG)

# The tests in four tiers (tests/conftest.py; docs/testing.md). Each runs its parallel part on two
# xdist workers (a shared whole-workflow run is one xdist group, built by one worker), then its serial
# part alone (wall-time bounds, browsers); the runs both parts read are built once, in a folder they
# share ($AURA_TEST_RUNS), removed at the end. An AURA_TEST_RUNS already set is kept, neither made
# nor removed here: .ci/run sets one for all its targets, so a run is built once per CI run. Python
# keeps its compiled and pytest its rewritten modules (PYTHONDONTWRITEBYTECODE unset). Without Chromium
# the browser tests are skipped with the reason (-rs prints it); CI installs Chromium (`make browser`)
# and requires it (AURA_REQUIRE_BROWSER=1).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -rs --durations=10
PARALLEL := -n 2 --dist loadgroup
SHARED_RUNS := if [ -n "$${AURA_TEST_RUNS:-}" ]; then mkdir -p "$$AURA_TEST_RUNS"; else runs=$$(mktemp -d) && trap 'cat "$$runs/runs.log" 2>/dev/null; rm -rf "$$runs"' EXIT && export AURA_TEST_RUNS="$$runs"; fi

# With SLURM's clients installed and no controller up, each Snakemake start waits 9-10 s in the SLURM
# plugin's `scontrol show config` (at its import); the tests name a controller that refuses at once
# (tests/slurm-no-controller.conf; tests/test_slurm.py lifts it for its one-node SLURM).
test-fast test test-e2e test-slurm: export SLURM_CONF ?= $(CURDIR)/tests/slurm-no-controller.conf

# Unit tests only: what a developer runs after each change (about a minute at most).
test-fast: venv
	$(PYTEST) -m fast $(PARALLEL) --timeout 60

# The README's test command: the fast tier, the heavier tests, the docs site and the shared mock run.
test: venv $(VENV)/.docs-installed
	$(BIN)/snakemake --lint
	$(SHARED_RUNS) && $(PYTEST) -m "(fast or suite) and not e2e and not serial" $(PARALLEL) && $(PYTEST) -m "suite and not e2e and serial"

# Every other whole-workflow run: the embedded model, the simulations, the provider dialects, Ctrl-C.
test-e2e: venv
	$(SHARED_RUNS) && $(PYTEST) -m "e2e and not serial" $(PARALLEL) && $(PYTEST) -m "e2e and serial"

# profiles/slurm on the one-node SLURM (tests/test_slurm.py; about 10.5 minutes, all serial: its jobs
# share the one node). Root and `make slurm`; without them the tests are skipped, CI requires them.
test-slurm: venv
	$(SHARED_RUNS) && $(PYTEST) -m slurm

lint: venv
	$(BIN)/snakemake --lint

bench: venv
	$(BIN)/python benchmarks/bench_model_module.py
	$(BIN)/python benchmarks/bench_bootstrap.py
	$(BIN)/python benchmarks/bench_snakemake_noop.py
	$(BIN)/python benchmarks/bench_faults.py
	$(BIN)/python benchmarks/bench_batch.py
	$(BIN)/python benchmarks/bench_simulator.py
	$(BIN)/python benchmarks/bench_coverage.py
	$(BIN)/python benchmarks/bench_call_tables.py
	$(BIN)/python benchmarks/bench_cache_check.py
	$(BIN)/python benchmarks/bench_answer_shapes.py
	$(BIN)/python benchmarks/bench_inspect_task.py
	$(BIN)/python benchmarks/bench_report_pages.py  # the printed report of `make simulate`'s run; needs Chromium (make browser)
	$(BIN)/python benchmarks/bench_paid_once.py  # about 9 min: six workflow runs on the stub
	$(BIN)/python benchmarks/bench_rate_limits.py  # about 25 min: two runs of 10,000 calls
	$(BIN)/python benchmarks/bench_replay.py  # about 12 min: the embedded and the packed mock replay under two commits
	BENCH_PAPER=1 $(BIN)/python benchmarks/bench_forecast_band.py  # about 35 min: 20 small simulated runs, two pilots and the paper-scale simulation
	$(BIN)/python benchmarks/bench_llama_threads.py
	$(BIN)/python benchmarks/bench_slurm_simulation.py  # about 20 min; root and `make slurm`: the one-node SLURM

# The guides under docs/ as a site (Sphinx, MyST Markdown, furo): warnings are errors, so a broken
# link, a missing page or an unknown heading anchor fails the build. Its tools (requirements-docs.txt)
# stay out of requirements.txt, and so out of the container image.
.PHONY: docs
DOCS_OUT ?= docs/_build/html
$(VENV)/.docs-installed: $(VENV)/.installed requirements-docs.txt
	$(BIN)/pip install --quiet -r requirements-docs.txt -c constraints.txt
	touch $@

docs: $(VENV)/.docs-installed
	$(BIN)/sphinx-build -W --keep-going -q -b html docs $(DOCS_OUT)

# Keeps results/README.md (what lands where) and the response cache.
clean:
	find results -mindepth 1 ! -name README.md -delete 2>/dev/null || true
	rm -rf logs .snakemake
