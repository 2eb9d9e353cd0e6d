#!/bin/sh
# Drops the cache's temporary files and records when it last ran.
set -eu
cd "$(dirname "$0")/../state"
find cache -name '*.tmp' -type f -delete
echo "cache rotated" > cache.done
