"""check.py IMPORTER: runs IMPORTER (as uid 10001) on an inbox the task never showed."""

import csv
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

importer = sys.argv[1]
ROOT = os.geteuid() == 0  # Harbor's verifier; else sandbox-platform's judge uid, with agent-run
AGENT = (
    ["setpriv", "--reuid=10001", "--regid=10001", "--clear-groups", "--reset-env"]
    if ROOT
    else ["agent-run"]
)
KEEP = {} if ROOT else {"pass_fds": (3,)}  # agent-run talks to its server on fd 3


def give(path: Path) -> None:
    """Hand the verifier's scratch tree to the agent's uid."""
    if ROOT:
        subprocess.run(["chown", "-R", "10001:10001", str(path)], check=True)
    else:  # the verifier's own files: what the agent's uid made is its own already
        mine = ["-user", str(os.geteuid()), "-exec", "chmod", "a+rwX", "{}", "+"]
        subprocess.run(["find", str(path), *mine], check=True)


def fail(msg: str) -> None:
    print(f"FAIL: {msg}")
    sys.exit(1)


def export(
    rows: list[tuple[str, str, str]], header: str = "name,email,city", crlf: bool = False
) -> str:
    end = "\r\n" if crlf else "\n"
    return end.join([header] + [",".join(r) for r in rows]) + end


def expected(rows: list[tuple[str, str, str]]) -> str:
    out = io.StringIO(newline="")
    w = csv.writer(out)
    w.writerow(["name", "email", "city"])
    w.writerows(sorted(rows, key=lambda r: r[1]))
    return out.getvalue()


# One export of each kind; the UTF-16 ones carry their byte-order marks, as
# Excel writes them; f.csv has its columns in another order, plus one more.
files = {
    "a.csv": export(
        [("Øyvind Ås", "oyvind@example.no", "Tromsø"), ("Ana", "ANA@example.pt", "Évora")]
    ).encode("utf-8"),
    "b.csv": export(
        [("Søren €uro", "soren@example.dk", "Århus"), ("Ana Dup", "ana@example.pt", "Porto")],
        crlf=True,
    ).encode("cp1252"),
    "c.csv": export([("Ελένη", "eleni@example.gr", "Αθήνα")], crlf=True).encode("utf-8-sig"),
    "d.csv": b"\xff\xfe"
    + export([("Chloé “Clo” Dubois", "chloe@example.fr", "Besançon")], crlf=True).encode(
        "utf-16-le"
    ),
    "e.csv": b"\xfe\xff" + export([("陈伟", "wei@example.cn", "北京")]).encode("utf-16-be"),
    "f.csv": export(
        [("Córdoba", "Ñandú Peña", "nandu@example.ar", "123")], header="city,name,email,phone"
    ).encode("cp1252"),
}
want = expected(
    [
        ("Øyvind Ås", "oyvind@example.no", "Tromsø"),
        ("Ana", "ana@example.pt", "Évora"),
        ("Søren €uro", "soren@example.dk", "Århus"),
        ("Ελένη", "eleni@example.gr", "Αθήνα"),
        ("Chloé “Clo” Dubois", "chloe@example.fr", "Besançon"),
        ("陈伟", "wei@example.cn", "北京"),
        ("Ñandú Peña", "nandu@example.ar", "Córdoba"),
    ]
)

base = Path(tempfile.mkdtemp(prefix="import."))
inbox = base / "inbox"
inbox.mkdir()
for name, data in files.items():
    (inbox / name).write_bytes(data)
out = base / "contacts.csv"
give(base)
done = subprocess.run(
    [*AGENT, "python3", importer, str(inbox), str(out)],
    cwd=base,
    capture_output=True,
    timeout=60,
    **KEEP,
)
if done.returncode != 0:
    fail(f"the importer exited {done.returncode}: {done.stderr[-400:]!r}")
got = out.read_bytes()
if got != want.encode("utf-8"):
    fail(f"contacts.csv is {got[:600]!r}, expected {want.encode('utf-8')[:600]!r}")
