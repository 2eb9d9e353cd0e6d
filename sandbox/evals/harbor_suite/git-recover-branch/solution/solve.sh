#!/bin/bash
# Reference fix: drop the empty loose object (nothing references it), rebuild
# the index from HEAD, delete the NUL-filled ref and point the branch at the
# dangling commit that git fsck finds (its tip: "export: flag items below 100
# as low"; with the reflog gone, fsck is the only way to find it).
set -euo pipefail
cd /workspace/inventory
find .git/objects -type f -empty -print -delete
rm -f .git/index
git reset -q
rm -f .git/refs/heads/feature/csv-export
tip=
for commit in $(git fsck --no-reflogs 2>/dev/null | awk '$1 == "dangling" && $2 == "commit" { print $3 }'); do
    if [ "$(git log -1 --format=%s "$commit")" = "export: flag items below 100 as low" ]; then
        tip=$commit
    fi
done
[ -n "$tip" ]
git branch feature/csv-export "$tip"
git fsck --full --strict
git status --short
