#!/bin/bash
# Reference fix: decode each file by its byte-order mark, else as UTF-8, else
# as cp1252, then parse the decoded text (the BOM is dropped by the codec).
set -euo pipefail
cd /workspace/importer
python3 - <<'PY'
from pathlib import Path

p = Path("import_contacts.py")
s = p.read_text()
old = '''def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))
'''
new = '''def decode(data: bytes) -> str:
    """The text of data: by its byte-order mark, else UTF-8, else cp1252."""
    for bom, codec in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(codec)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252")


def read_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(decode(path.read_bytes()), newline="")))
'''
assert old in s
s = s.replace(old, new).replace("import csv\n", "import codecs\nimport csv\nimport io\n", 1)
p.write_text(s)
PY
python3 import_contacts.py inbox /tmp/contacts.csv
cat /tmp/contacts.csv
