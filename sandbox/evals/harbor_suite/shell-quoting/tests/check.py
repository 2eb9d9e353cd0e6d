"""check.py COLLECT: runs COLLECT (as uid 10001) on hostile trees and checks what it moved."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

collect = sys.argv[1]
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


def run(cwd: Path, *args: str) -> None:
    give(base)
    done = subprocess.run(
        [*AGENT, collect, *args], cwd=cwd, capture_output=True, timeout=60, **KEEP
    )
    if done.returncode != 0:
        fail(f"collect {args} exited {done.returncode}: {done.stderr[-300:]!r}")


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


base = Path(tempfile.mkdtemp(prefix="collect."))
src = base / "my photos [2024]"
dest = base / "sorted out" / "all *"
cwd = base / "cwd"
layout = {
    "a b.jpg": b"1",
    "trip/a b.jpg": b"2",
    "trip/day 2/a b.JPG": b"3",
    "-rf.jpg": b"4",
    "trip/*.jpg": b"5",
    "trip/?.jpeg": b"6",
    "weird/new\nline.jpg": b"7",
    "weird/caf\u00e9 [1].Jpeg": b"8",
    "weird/  lead and trail  .jpg": b"9",
    "notes.txt": b"keep",
    "trip/a b.jpg.txt": b"keep2",
    "trip/jpg": b"keep3",
    "deep/x/y/z/-n": b"keep4",
}
for rel, data in layout.items():
    path = src / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
cwd.mkdir()
(cwd / "decoy.jpg").write_bytes(b"decoy")
(cwd / "z.jpeg").write_bytes(b"decoy")

run(cwd, str(src), str(dest), "jpg", "jpeg")

left = files(src)
if left != {
    "notes.txt": b"keep",
    "trip/a b.jpg.txt": b"keep2",
    "trip/jpg": b"keep3",
    "deep/x/y/z/-n": b"keep4",
}:
    fail(f"SRC still holds {sorted(left)}")
if files(cwd) != {"decoy.jpg": b"decoy", "z.jpeg": b"decoy"}:
    fail("collect touched its working directory")
moved = files(dest)
manifest = moved.pop("MANIFEST", b"").decode()
names = set(moved)
clash = {n for n in names if n.startswith("a b")}
if clash != {"a b.jpg", "a b-1.jpg", "a b.JPG"}:
    fail(f"the three 'a b' files became {sorted(clash)}")
if {moved["a b.jpg"], moved["a b-1.jpg"]} != {b"1", b"2"} or moved["a b.JPG"] != b"3":
    fail("the 'a b' files lost or mixed contents")
rest = {n: moved[n] for n in names - clash}
want = {
    "-rf.jpg": b"4",
    "*.jpg": b"5",
    "?.jpeg": b"6",
    "new\nline.jpg": b"7",
    "caf\u00e9 [1].Jpeg": b"8",
    "  lead and trail  .jpg": b"9",
}
if rest != want:
    fail(f"DEST holds {sorted(rest)}, expected {sorted(want)}")
for name, data in moved.items():
    if "\n" in name:
        continue
    line = next((x for x in manifest.splitlines() if x.endswith(f" -> {dest}/{name}")), None)
    if line is None:
        fail(f"no MANIFEST line for {name!r}")
    old = line[: -len(f" -> {dest}/{name}")]
    if not old.startswith(f"{src}/") or layout.get(old[len(str(src)) + 1 :]) != data:
        fail(f"MANIFEST line {line!r} does not name the file's old path")

# A second run into the same DEST: every name clashes now.
for rel in ("a b.jpg", "q/-rf.jpg"):
    path = src / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"again")
run(base, str(src), str(dest), "JPG")
moved = files(dest)
if moved.get("a b-2.jpg") != b"again" or moved.get("-rf-1.jpg") != b"again":
    fail(f"a second run did not add a b-2.jpg and -rf-1.jpg: {sorted(moved)}")
