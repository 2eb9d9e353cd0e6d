"""The tasks of ``make demo-agent``: read a digit from the sandbox, write the next one (mod n).

Every task's workspace holds ``v`` (one digit, different per task) and the
same instruction; the hidden test passes when the agent's ``a`` holds
``(v + 1) mod n`` (``n``: 3 in the demo). The test reads the agent's file
through ``agent-run`` (command tests cannot read the agent's workspace
directly) and compares it with its own copy of ``v`` in ``tests/``. Nothing in the prompt tells the
tasks apart: only an observation of ``v`` does.

``python -m sandbox.rl.demo_tasks OUT [N]`` writes ``OUT/train/v0..`` and
``OUT/held-out/h0..`` (evaluator task directories, one per value below N).
"""

from __future__ import annotations

import sys
from pathlib import Path

DEMO_MODULUS = 3
"""The demo's values: 0..2 (ten were not learnable in its time budget; see the README)."""

TASK_YAML = """\
instruction: "The file v holds a digit d. Write (d + 1) mod {modulus} to the file a."
agent:
  timeout_s: 120
  max_steps: 8
tests:
  command: '[ "$(agent-run cat a)" = "$(( ($(cat v) + 1) % {modulus} ))" ]'
  timeout_s: 30
"""


def write_task(folder: Path, digit: int, *, modulus: int = 10, note: str = "") -> Path:
    """One task directory: ``files/v`` and ``tests/v`` hold ``digit``; ``a`` must hold
    ``(digit + 1) % modulus``."""
    for part in ("files", "tests", "solution"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(TASK_YAML.format(modulus=modulus))
    (folder / "files" / "v").write_text(f"{digit}\n")
    (folder / "tests" / "v").write_text(f"{digit}\n")
    (folder / "solution" / "a").write_text(f"{(digit + 1) % modulus}\n")
    if note:  # a file of the workspace: a different task (its own digest and snapshot)
        (folder / "files" / "note").write_text(note)
    return folder


def write_demo_tasks(root: Path, modulus: int = DEMO_MODULUS) -> tuple[Path, Path]:
    """``root/train`` and ``root/held-out``: ``modulus`` tasks each, one per digit.

    The held-out tasks are other task directories (their workspace also holds
    ``note``: their own digests, uploads and snapshots) over the same ten
    values: from scratch, a model cannot map a digit it has never observed, so
    held out means fresh episodes of tasks never trained on, not unseen values.
    """
    train, held_out = root / "train", root / "held-out"
    for digit in range(modulus):
        write_task(train / f"v{digit}", digit, modulus=modulus)
        write_task(held_out / f"h{digit}", digit, modulus=modulus, note="held out\n")
    return train, held_out


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m sandbox.rl.demo_tasks OUT_DIR [MODULUS]")
    modulus = int(sys.argv[2]) if len(sys.argv) == 3 else DEMO_MODULUS
    for path in write_demo_tasks(Path(sys.argv[1]), modulus):
        print(path)
