#!/bin/sh
# Run by the task's setup: it needs its executable bit in the workspace.
for i in 1 2 3 4 5 6 7; do
  echo "2024-01-0$i INFO started"
  if [ $((i % 3)) -eq 0 ]; then echo "2024-01-0$i ERROR disk full"; fi
done > app.log
echo "2024-01-09 ERROR network down" >> app.log
