#!/bin/bash
grep -c "^$(cat /app/level.txt) " /app/logs/app.log > /app/count.txt
