"""The tasks of ``make demo-agent``: read the digit in the sandbox's file ``v``, write it to ``a``.

Every task's workspace holds ``v`` (one digit, different per task) and every task
has the same instruction; the hidden test passes when the agent's ``a`` holds the
digit of ``v``. The test reads the agent's file through ``agent-run`` (command
tests cannot read the agent's workspace directly) and compares it with its own
copy of ``v`` in ``tests/``. Nothing in the instruction tells the tasks apart:
only an observation of ``v`` does.

``python -m sandbox.rl.demo_tasks OUT`` writes ``OUT/train/v0..v9`` and
``OUT/held-out/h0..h9`` (evaluator task directories, one per digit).
"""

from __future__ import annotations

import sys
from pathlib import Path

INSTRUCTION = "The file v holds a digit: read it (< v) and write it to the file a."
"""The read call is written in it as the demo's tool-call token (``< v``) spells it."""

TASK_YAML = f"""\
instruction: "{INSTRUCTION}"
agent:
  timeout_s: 120
  max_steps: 8
tests:
  command: '[ "$(agent-run cat a)" = "$(cat v)" ]'
  timeout_s: 30
"""


def write_task(folder: Path, digit: int, *, note: str = "") -> Path:
    """One task directory: ``files/v`` and ``tests/v`` hold ``digit``, and so must ``a``."""
    for part in ("files", "tests", "solution"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(TASK_YAML)
    for part in ("files/v", "tests/v", "solution/a"):
        (folder / part).write_text(f"{digit}\n")
    if note:  # a file of the workspace: a different task (its own digest and snapshot)
        (folder / "files" / "note").write_text(note)
    return folder


def write_demo_tasks(root: Path) -> tuple[Path, Path]:
    """``root/train`` and ``root/held-out``: ten tasks each, one per digit.

    The held-out tasks are other task directories (their workspace also holds
    ``note``: their own digests, uploads and snapshots) over the same ten
    digits: held out means fresh episodes of tasks never trained on.
    """
    train, held_out = root / "train", root / "held-out"
    for digit in range(10):
        write_task(train / f"v{digit}", digit)
        write_task(held_out / f"h{digit}", digit, note="held out\n")
    return train, held_out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m sandbox.rl.demo_tasks OUT_DIR")
    for path in write_demo_tasks(Path(sys.argv[1])):
        print(path)
