#!/bin/sh
# make-repo.sh DIR: a small project history (main and feature/csv-export),
# then the damage a crash left: the feature branch's ref file full of NUL
# bytes, the reflogs gone, the index truncated and an empty loose object.
set -eu
dir=$1
export GIT_AUTHOR_NAME="Ada Dev" GIT_AUTHOR_EMAIL=ada@example.com
export GIT_COMMITTER_NAME="Ada Dev" GIT_COMMITTER_EMAIL=ada@example.com
export HOME=/tmp GIT_CONFIG_NOSYSTEM=1
commit() {
    git add -A
    GIT_AUTHOR_DATE="$1 +0000" GIT_COMMITTER_DATE="$1 +0000" git commit -q -m "$2"
}

git init -q -b main "$dir"
cd "$dir"
cat > inventory.py <<'PY'
"""Stock levels: load, adjust, report."""


def load(path):
    stock = {}
    with open(path) as f:
        for line in f:
            name, qty = line.split()
            stock[name] = int(qty)
    return stock
PY
printf 'bolt 120\nnut 300\nwasher 75\n' > stock.txt
commit "2024-03-01 09:00:00" "inventory: load stock levels"

cat >> inventory.py <<'PY'


def adjust(stock, name, delta):
    stock[name] = stock.get(name, 0) + delta
    if stock[name] < 0:
        raise ValueError(f"{name}: stock would go negative")
PY
commit "2024-03-02 10:30:00" "inventory: adjust with a negative-stock check"

git checkout -q -b feature/csv-export
cat > export.py <<'PY'
"""CSV export of stock levels."""

import csv


def export(stock, path):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["item", "quantity"])
        for name in sorted(stock):
            writer.writerow([name, stock[name]])
PY
commit "2024-03-04 14:00:00" "export: write stock levels as CSV"
sed -i 's/writer.writerow(\["item", "quantity"\])/writer.writerow(["item", "quantity", "low"])/; s/writer.writerow(\[name, stock\[name\]\])/writer.writerow([name, stock[name], "yes" if stock[name] < 100 else "no"])/' export.py
commit "2024-03-05 16:45:00" "export: flag items below 100 as low"

git checkout -q main
cat >> inventory.py <<'PY'


def report(stock):
    return "\n".join(f"{name}: {qty}" for name, qty in sorted(stock.items()))
PY
commit "2024-03-06 08:15:00" "inventory: plain-text report"

# An unreferenced blob (a scratch file someone hashed), emptied by the crash.
scratch=$(printf 'scratch notes\n' | git hash-object -w --stdin)
obj=.git/objects/$(echo "$scratch" | cut -c1-2)/$(echo "$scratch" | cut -c3-)
chmod u+w "$obj"
: > "$obj"

head -c 41 /dev/zero > .git/refs/heads/feature/csv-export
rm -rf .git/logs
head -c 20 .git/index > .git/index.part && mv .git/index.part .git/index
