#!/bin/bash
# Reference fix: every expansion quoted, find's output read NUL-separated, the
# -iname pattern quoted (so the shell never globs it), "--" before paths given
# to mv and basename, and the extension split done with parameter expansion.
set -euo pipefail
cat > /workspace/tools/collect <<'SH'
#!/bin/bash
# collect SRC DEST EXT...: moves every file under SRC (recursively) whose
# extension is one of EXT (case-insensitive: jpg matches x.JPG) into DEST,
# flat. A name already taken in DEST gets -1, -2, ... before its extension
# (a b.jpg, then a b-1.jpg). Each move appends "OLD -> NEW" (full paths) to
# DEST/MANIFEST. Files with other extensions stay where they are.
set -euo pipefail
src=$1
dest=$2
shift 2
mkdir -p -- "$dest"
for ext in "$@"; do
    while IFS= read -r -d '' f; do
        name=${f##*/}
        target=$dest/$name
        n=1
        while [ -e "$target" ]; do
            target=$dest/${name%.*}-$n.${name##*.}
            n=$((n + 1))
        done
        mv -- "$f" "$target"
        printf '%s -> %s\n' "$f" "$target" >> "$dest/MANIFEST"
    done < <(find "$src" -type f -iname "*.$ext" -print0)
done
SH
chmod 0755 /workspace/tools/collect
