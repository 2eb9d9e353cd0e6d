# Entry points: `make setup` (venv + Docker engine + images, idempotent),
# `make up` (serve), `make test`, `make demo` (GRPO on sandbox rewards), `make bench`,
# `make clean`.
# The engine and the base image need root (debootstrap, dockerd).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: setup venv engine images up test demo bench clean

setup: venv engine images

venv: $(STAMP)

# Re-install only when pyproject.toml is newer than the stamp.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev,rl]'
	touch $(STAMP)

engine: venv
	$(BIN)/sandbox engine ensure

images: engine
	$(BIN)/sandbox images build

up: setup
	$(BIN)/sandbox serve

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sandbox api examples
	$(BIN)/python -m pytest -q --durations=15

# Trains the tiny model on sandbox rewards; starts a service for the run if none answers.
demo: setup
	$(BIN)/sandbox train sandbox/rl/configs/demo.yaml --start-service

bench: setup
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(STAMP)
