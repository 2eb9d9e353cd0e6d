"""PNG plots of a training run from its ``metrics.jsonl``: reward, pass rate, KL, time split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` (a torn last line, from a killed run, is skipped)."""
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def plot_run(metrics: Path, out: Path) -> Path:
    """Draw the four panels of a run into ``out`` (a PNG) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_metrics(metrics)
    steps = [r["step"] for r in records]

    def series(key: str) -> tuple[list[int], list[float]]:
        pairs = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    figure, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    reward, rate, kl, split = axes.flat
    reward.plot(*series("reward"), label="train reward")
    reward.set_title("reward (mean per step)")
    rate.plot(*series("pass_rate"), label="train pass rate", alpha=0.6)
    rate.plot(*series("held_out_pass_rate"), marker="o", label="held-out pass rate")
    for event in (r for r in records if r.get("rolled_back")):
        rate.axvline(event["step"], color="red", linestyle=":", label="rollback")
    rate.set_ylim(-0.02, 1.02)
    rate.set_title("pass rate")
    rate.legend(loc="lower right")
    kl.plot(*series("kl"), label="KL to reference (k3)")
    kl.plot(*series("clip_fraction"), label="clip fraction")
    kl.set_title("KL and clipping")
    kl.legend(loc="upper right")
    parts = ["generate_s", "wait_s", "update_s"]
    split.stackplot(
        steps,
        *[[r.get(part, 0.0) for r in records] for part in parts],
        labels=["generate", "waiting on the sandbox", "update"],
    )
    split.set_title("time per step (s)")
    split.legend(loc="upper right")
    for axis in axes.flat:
        axis.set_xlabel("step")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=90)
    plt.close(figure)
    return out


def plot_held_out(runs: dict[str, Path], out: Path, tool: str | None = None) -> Path:
    """The held-out pass rate of several runs (label -> ``metrics.jsonl``) against wall time;
    with ``tool``, beside it the calls of that tool per training episode (multi-turn runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if tool else 1
    figure, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), constrained_layout=True)
    held, calls = (axes[0], axes[1]) if tool else (axes, None)
    for label, metrics in runs.items():
        records = read_metrics(metrics)
        minutes = [r.get("elapsed_s", 0.0) / 60 for r in records]
        rates = [
            (m, r["held_out_pass_rate"])
            for m, r in zip(minutes, records, strict=True)
            if "held_out_pass_rate" in r
        ]
        held.plot(*zip(*rates, strict=True), marker="o", label=label)
        if calls is not None:
            used = [
                (m, r["calls_by_tool"].get(tool, 0.0))
                for m, r in zip(minutes, records, strict=True)
                if "calls_by_tool" in r
            ]
            calls.plot(*zip(*used, strict=True), label=label)
    held.set_ylim(-0.02, 1.02)
    held.set_xlabel("wall time (min)")
    held.set_ylabel("held-out pass rate")
    held.legend(loc="center right")
    if calls is not None:
        calls.set_ylim(-0.02, 1.02)
        calls.set_xlabel("wall time (min)")
        calls.set_ylabel(f"{tool} calls per training episode")
        calls.legend(loc="center right")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=90)
    plt.close(figure)
    return out


if __name__ == "__main__":
    import sys

    out, *rest = sys.argv[1:] or [""]
    tool = None
    if rest[:1] == ["--tool"] and len(rest) > 1:
        tool, rest = rest[1], rest[2:]
    if not out or not rest or len(rest) % 2:
        sys.exit("usage: python -m sandbox.rl.plots OUT.png [--tool NAME] LABEL METRICS ...")
    print(plot_held_out(dict(zip(rest[::2], map(Path, rest[1::2]), strict=True)), Path(out), tool))
