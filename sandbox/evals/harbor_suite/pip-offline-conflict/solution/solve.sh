#!/bin/bash
# Reference fix: the setuptools package list names the real package directory,
# and the tabfmt requirement is one the wheel dir satisfies and the code works
# with (it calls tabfmt.render, which tabfmt 2 removed; unitconv needs >= 1.3).
set -euo pipefail
cd /workspace/stockreport
sed -i -e 's/"tabfmt==1.2"/"tabfmt>=1.3,<2"/' -e 's/packages = \["stock_report"\]/packages = ["stockreport"]/' pyproject.toml
python3 -m pip install --quiet --no-index --find-links /opt/wheels \
    --no-build-isolation --target /workspace/lib /workspace/stockreport
cd /tmp
PYTHONPATH=/workspace/lib python3 -m stockreport /workspace/stockreport/stock.csv
