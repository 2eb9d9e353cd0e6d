# Entry points: `make setup` (venv, the Harbor and OpenEnv venvs, Docker engine, images,
# promtool; idempotent),
# `make up` (serve), `make test`, `make demo` (GRPO on sandbox rewards), `make bench`,
# `make clean`.
# The engine and the base image need root (debootstrap, dockerd).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: setup python-venv venv harbor-venv openenv-venv browser engine images promtool up \
	test test-sweeps demo demo-agent demo-agent-control bench-venv bench clean

# The images (the engine first) and the two side venvs are made at the same time: they wait
# mostly on the network and the disk. apt-get runs in one of them at a time (the engine's
# packages), then for chromium and promtool.
setup: venv
	@$(MAKE) --no-print-directory -j3 images harbor-venv openenv-venv
	@$(MAKE) --no-print-directory browser promtool

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

# The console's browser tests (tests/ui) drive Debian's chromium through Playwright (the dev
# extra); Playwright's own browser download is not used. As root with apt-get it is installed
# when missing; otherwise the error says what to install.
CHROMIUM := /usr/bin/chromium
ENSURE_CHROMIUM = \
	if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "$(CHROMIUM) is missing: apt-get install chromium"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	      chromium >/dev/null || exit 1; \
	  fi; \
	  [ -x $(CHROMIUM) ] || { \
	    echo "error: the console's browser tests need Debian's chromium at $(CHROMIUM):" \
	      "install it (as root: apt-get install chromium, which \`sudo make setup\` does)" >&2; \
	    exit 1; }; \
	fi

browser:
	@$(ENSURE_CHROMIUM)

# Re-install only when pyproject.toml is newer than the stamp. A venv without pip (left by
# a failed `python3 -m venv`) is completed in place.
$(STAMP): pyproject.toml
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || { \
	  $(ENSURE_CAN_VENV); echo "$(PYTHON) -m venv $(VENV)"; $(PYTHON) -m venv $(VENV) || exit 1; }
	$(BIN)/python -m pip install --quiet -e '.[dev,rl,fleet,inspect,trl,otel]'
	touch $(STAMP)

# The Harbor provider's venv (sandbox/integrations/harbor.py): the `harbor` package needs
# Python >= 3.12 while ours runs on 3.11+, so it gets a venv of its own, with this package
# installed in it too (the provider uses sandbox.client). HARBOR_PYTHON= picks the
# interpreter; otherwise python3.12 or python3.13 on PATH (pyenv shims that do not run
# are skipped), then the newest 3.12/3.13 under $$PYENV_ROOT (default ~/.pyenv).
HARBOR_VENV := .venv-harbor
HARBOR_STAMP := $(HARBOR_VENV)/.installed-stamp
PYENV_ROOT ?= $(HOME)/.pyenv
IS_PY312 = -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1

harbor-venv: $(HARBOR_STAMP)

$(HARBOR_STAMP): pyproject.toml
	@$(HARBOR_VENV)/bin/python -m pip --version >/dev/null 2>&1 || { \
	  found=; \
	  if [ -n "$(HARBOR_PYTHON)" ] && ! $(HARBOR_PYTHON) $(IS_PY312); then \
	    echo "error: HARBOR_PYTHON=$(HARBOR_PYTHON) is not a Python 3.12+ with ensurepip" >&2; \
	    exit 1; \
	  fi; \
	  for py in $(HARBOR_PYTHON) python3.12 python3.13 \
	      $$(ls -d $(PYENV_ROOT)/versions/3.1[23]*/bin/python3 2>/dev/null | sort -rV); do \
	    if $$py $(IS_PY312); then found=$$py; break; fi; \
	  done; \
	  if [ -z "$$found" ]; then \
	    echo "error: the Harbor provider's venv needs Python 3.12 or 3.13 (the harbor" \
	      "package requires >= 3.12): none runs as python3.12/python3.13 on PATH or under" \
	      "$(PYENV_ROOT)/versions; install one (e.g. \`pyenv install 3.12\`) or point" \
	      "HARBOR_PYTHON= at one" >&2; \
	    exit 1; \
	  fi; \
	  echo "$$found -m venv $(HARBOR_VENV)"; $$found -m venv $(HARBOR_VENV) || exit 1; }
	$(HARBOR_VENV)/bin/python -m pip install --quiet -e '.[harbor]'
	touch $(HARBOR_STAMP)

# OpenEnv's client package for tests/api/test_openenv.py: openenv-core imports gradio and
# fastmcp (some 470 MB), so it gets a venv of its own rather than the main one's weight.
OPENENV_VENV := .venv-openenv
OPENENV_STAMP := $(OPENENV_VENV)/.installed-stamp

openenv-venv: $(OPENENV_STAMP)

$(OPENENV_STAMP): pyproject.toml
	@$(OPENENV_VENV)/bin/python -m pip --version >/dev/null 2>&1 || { \
	  $(ENSURE_CAN_VENV); echo "$(PYTHON) -m venv $(OPENENV_VENV)"; \
	  $(PYTHON) -m venv $(OPENENV_VENV) || exit 1; }
	$(OPENENV_VENV)/bin/python -m pip install --quiet -e '.[openenv]'
	touch $(OPENENV_STAMP)

# promtool checks and unit-tests the alert rules in deploy/prometheus (tests/deploy). Debian
# ships it in the `prometheus` package, whose daemon we do not want: policy-rc.d keeps the
# install from starting it (one is made for the install when the machine has none), and
# on systemd it is disabled so it does not start at boot either. Silent when promtool is
# already on PATH.
ENSURE_PROMTOOL = \
	if ! command -v promtool >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "promtool is missing: apt-get install prometheus (its daemon is not started)"; \
	    export DEBIAN_FRONTEND=noninteractive; guard=; \
	    if [ ! -e /usr/sbin/policy-rc.d ]; then \
	      printf '\#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && \
	      chmod 755 /usr/sbin/policy-rc.d && guard=1; \
	    fi; \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	      prometheus >/dev/null; status=$$?; \
	    [ -z "$$guard" ] || rm -f /usr/sbin/policy-rc.d; \
	    [ $$status = 0 ] || exit 1; \
	    if [ -d /run/systemd/system ]; then \
	      systemctl disable --now prometheus.service >/dev/null 2>&1 || true; \
	    fi; \
	  fi; \
	  command -v promtool >/dev/null 2>&1 || { \
	    echo "error: promtool is not installed (tests/deploy run it on the alert rules):" \
	      "install Debian's prometheus package (as root: apt-get install prometheus, which" \
	      "\`sudo make setup\` does) or put a promtool 2.x on PATH" >&2; \
	    exit 1; }; \
	fi

promtool:
	@$(ENSURE_PROMTOOL)

engine: venv
	$(BIN)/sandbox engine ensure

images: engine
	$(BIN)/sandbox images build

up: venv engine images
	$(BIN)/sandbox serve

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sandbox api examples
	$(BIN)/python -m pytest -q --durations=15 -m "not sweep"

# The exhaustive sweeps over shipped data that `make test` leaves out (tests marked
# `sweep`: each repeats, for every item of a data set, what `make test` checks on a part).
test-sweeps: setup
	$(BIN)/python -m pytest -q --durations=15 -m sweep

# Trains the tiny model on sandbox rewards; starts a service for the run if none answers.
demo: venv engine images
	$(BIN)/sandbox train sandbox/rl/configs/demo.yaml --start-service

# Multi-turn GRPO on episodes (sandbox/rl/configs/demo-agent.yaml), and its control run with
# the observations blanked (exit 1, "below target", is its expected outcome); the plot
# has both runs' held-out pass rate and how often their policies read v.
demo-agent: venv engine images
	$(BIN)/python -m sandbox.rl.demo_tasks runs/demo-agent/tasks
	$(BIN)/sandbox train sandbox/rl/configs/demo-agent.yaml --start-service

demo-agent-control: venv engine images
	$(BIN)/python -m sandbox.rl.demo_tasks runs/demo-agent/tasks
	$(BIN)/sandbox train sandbox/rl/configs/demo-agent.yaml --start-service \
	    --blank-observations --out runs/demo-agent-control || [ $$? -eq 1 ]
	$(BIN)/python -m sandbox.rl.plots runs/demo-agent/held-out.png --tool read_file \
	    demo runs/demo-agent/metrics.jsonl control runs/demo-agent-control/metrics.jsonl

# The benchmarks' own extra (bench/bench_run.py's llm-sandbox baseline), on top of the venv.
BENCH_STAMP := $(VENV)/.bench-installed-stamp

bench-venv: $(BENCH_STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: bench-venv engine images
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(HARBOR_VENV) $(OPENENV_VENV)
