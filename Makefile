# Entry points: `make setup` (venv + Docker engine + images, idempotent),
# `make up` (serve), `make test`, `make demo` (GRPO on sandbox rewards), `make bench`,
# `make clean`.
# The engine and the base image need root (debootstrap, dockerd).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: setup python-venv venv engine images up test demo bench clean

setup: venv engine images

venv: $(STAMP)

# Whether $(PYTHON) can make a venv with pip: Debian ships ensurepip apart, in python3-venv
# (without it `python3 -m venv` fails half-way, leaving a venv with no pip).
CAN_VENV = $(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1

# A fresh Debian may lack python3-venv, or python3 itself: as root with apt-get they are
# installed; otherwise the error says what to install. Silent when $(PYTHON) can already.
ENSURE_CAN_VENV = \
	if ! $(CAN_VENV); then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "$(PYTHON) cannot create a venv: apt-get install python3 python3-venv"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	      python3 python3-venv >/dev/null || exit 1; \
	  fi; \
	  $(CAN_VENV) || { \
	    echo "error: $(PYTHON) cannot create a venv (no python3, or no ensurepip):" \
	      "install python3 and python3-venv (as root: apt-get install python3-venv," \
	      "which \`sudo make setup\` does), or point PYTHON= at a Python 3.11+ that can" >&2; \
	    exit 1; }; \
	fi

python-venv:
	@$(ENSURE_CAN_VENV)

# Re-install only when pyproject.toml is newer than the stamp. A venv without pip (left by
# a failed `python3 -m venv`) is completed in place.
$(STAMP): pyproject.toml
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || { \
	  $(ENSURE_CAN_VENV); echo "$(PYTHON) -m venv $(VENV)"; $(PYTHON) -m venv $(VENV) || exit 1; }
	$(BIN)/python -m pip install --quiet -e '.[dev,rl,fleet,inspect]'
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
