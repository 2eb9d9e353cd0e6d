#!/bin/bash
# Compares the program's output for N=30 with the expected lines; reward 1 or 0.
expected=$(python3 /tests/expected.py 30)
actual=$(cd /workspace && timeout 10 python3 fizzbuzz.py 30 2>/logs/verifier/stderr.txt)
if [ -n "$actual" ] && [ "$actual" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
