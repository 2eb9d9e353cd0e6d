#!/bin/bash
# Runs in the verifier's own environment, where only the artifact came along.
if [ "$(cat /workspace/shout.txt 2>/dev/null)" = "THE SANDBOX IS LOCKED DOWN" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
