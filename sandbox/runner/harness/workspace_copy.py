"""Copy an agent's workspace for its judge: exec bits kept, no link that leads out of the copy.

    python3 -I workspace_copy.py SOURCE DEST
    python3 -I workspace_copy.py --prune-links DIR

Runs as the judge uid, once every process the agent left is dead and before
anything else (the hidden tests) exists in the judge's directory. DEST must
not exist. What is copied:

- directories, as mode 0700;
- regular files, as 0700 when the agent left any executable bit on them and
  0600 otherwise (the judge's files are its own; a script the agent made
  executable stays executable);
- symbolic links, as links, but only those that resolve, once the whole tree is
  copied, to something that exists inside DEST. A link to ``/judge/...``, to a
  system file, to ``..``, a dangling link, a loop, and a link that only led
  somewhere through another dropped link are all left out: the judge never
  follows an agent's link out of the copy.

What the judge cannot read (the agent made it unreadable), FIFOs, sockets and
devices are left out too. Each thing left out is named on stderr; the exit
status is 0 unless the copy itself failed (DEST exists, a disk filled up).

``--prune-links DIR`` applies the same rule to links in place (as the sandbox
uid, once the agent's processes are dead): a verifier that works on the
agent's own workspace (``agent-run``) never follows a link of the agent's out
of it, as Harbor's artifact copy drops them.
"""

from __future__ import annotations

import os
import stat
import sys

CHUNK = 1 << 20


def copy_tree(source: str, dest: str) -> list[str]:
    """Copy ``source`` to ``dest`` (see the module); returns what was left out."""
    os.mkdir(dest, 0o700)
    skipped: list[str] = []
    links: list[str] = []
    stack = [""]
    while stack:
        relative = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(source, relative)), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(f"{relative or '.'}/: {exc.strerror}")
            continue
        for entry in entries:
            path = os.path.join(relative, entry.name)
            target = os.path.join(dest, path)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
                links.append(target)
            elif entry.is_dir(follow_symlinks=False):
                os.mkdir(target, 0o700)
                stack.append(path)
            elif entry.is_file(follow_symlinks=False):
                problem = _copy_file(entry.path, target)
                if problem:
                    skipped.append(f"{path}: {problem}")
            else:
                skipped.append(f"{path}: neither a file, a directory nor a link")
    skipped += _drop_escaping_links(links, dest)
    return skipped


def _copy_file(source: str, target: str) -> str | None:
    try:
        src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return exc.strerror or "cannot open"
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        mode = 0o700 if info.st_mode & 0o111 else 0o600
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            while chunk := os.read(src, CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view) :]
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return None


def prune_links(root: str) -> list[str]:
    """Remove every link below ``root`` that does not resolve inside it; what was removed."""
    links = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                links.append(path)
    return _drop_escaping_links(links, root)


def _drop_escaping_links(links: list[str], dest: str) -> list[str]:
    """Remove, until none is left, every link that does not resolve to something inside."""
    root = os.path.realpath(dest)
    dropped: list[str] = []
    while True:
        escaping = [link for link in links if not _resolves_inside(link, root)]
        if not escaping:
            return dropped
        for link in escaping:
            dropped.append(
                f"{os.path.relpath(link, dest)}: a link to {os.readlink(link)!r}, "
                "which does not lead to anything inside the copy"
            )
            os.unlink(link)
            links.remove(link)


def _resolves_inside(link: str, root: str) -> bool:
    try:
        resolved = os.path.realpath(link, strict=True)
    except OSError:  # dangling, a loop, or a component it cannot search
        return False
    return resolved == root or resolved.startswith(root + os.sep)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--prune-links":
        for problem in prune_links(argv[1]):
            print(f"removed before the tests: {problem}", file=sys.stderr)
        return 0
    if len(argv) != 2:
        print("usage: workspace_copy.py SOURCE DEST | --prune-links DIR", file=sys.stderr)
        return 2
    for problem in copy_tree(*argv):
        print(f"left out of the judged copy: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
