#!/bin/bash
correct=0
[ "$(cat /app/count.txt 2>/dev/null)" = "$(cat /opt/verifier/expected-count)" ] && correct=1
formatted=0
[ -f count.txt ] && [ "$(tail -c1 count.txt | od -An -c | tr -d ' ')" = '\n' ] && formatted=1
printf '{"reward": %s, "formatted": %s}\n' "$correct" "$formatted" > /logs/verifier/reward.json
