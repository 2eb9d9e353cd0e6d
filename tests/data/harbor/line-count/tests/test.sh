#!/bin/bash
# Three inputs with known counts; the reward is the fraction answered right (JSON).
passed=0
check() {  # input, expected count
  got=$(printf '%b' "$1" | timeout 10 bash /workspace/count.sh 2>/dev/null)
  [ "$got" = "$2" ] && passed=$((passed + 1))
}
check 'a\nb\nc\n' 3
check 'a\n\n   \nb\n' 2
check '\n\n' 0
python3 -c "import json, sys; json.dump({'reward': int(sys.argv[1]) / 3}, open('/logs/verifier/reward.json', 'w'))" "$passed"
