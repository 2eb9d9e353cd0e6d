#!/bin/bash
set -euo pipefail
echo "the sandbox is locked down" | tr '[:lower:]' '[:upper:]' > /workspace/shout.txt
