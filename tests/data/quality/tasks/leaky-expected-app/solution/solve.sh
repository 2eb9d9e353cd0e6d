#!/bin/bash
cat > /app/rev.py <<'PY'
import sys

for line in sys.stdin:
    print(line.rstrip("\n")[::-1])
PY
