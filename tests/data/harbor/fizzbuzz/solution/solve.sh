#!/bin/bash
set -euo pipefail
cat > /workspace/fizzbuzz.py <<'PY'
import sys

for i in range(1, int(sys.argv[1]) + 1):
    print("Fizz" * (i % 3 == 0) + "Buzz" * (i % 5 == 0) or i)
PY
