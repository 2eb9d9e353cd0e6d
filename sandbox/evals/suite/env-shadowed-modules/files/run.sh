#!/bin/bash
# Nightly sensor report: bash run.sh MEASUREMENTS_CSV
set -euo pipefail
cd "$(dirname "$0")"
PYTHONPATH=vendor python3 report.py config.yaml "$1"
