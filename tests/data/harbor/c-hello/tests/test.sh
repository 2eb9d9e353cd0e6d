#!/bin/bash
# Runs the built program: the greeting, and exit 2 without an argument.
cd /workspace
reward=0
if [ "$(timeout 10 ./hello World)" = "Hello, World!" ]; then
  timeout 10 ./hello; [ $? -eq 2 ] && reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
