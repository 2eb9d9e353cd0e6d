"""``sandbox train CONFIG``: GRPO with sandbox rewards, a progress bar, metrics and plots.

Registered by :mod:`sandbox.cli`; torch and transformers are imported only when
the command runs, so the rest of the CLI works without the ``.[rl]`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandbox.host.launcher import ServiceProcess, answers

from ..errors import InvalidRequestError
from .config import TrainConfig, load_config

EXIT_OK, EXIT_BELOW_TARGET = 0, 1
RL_MODULES = ("torch", "transformers", "tqdm", "matplotlib")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``train`` to the CLI's subcommands."""
    train = commands.add_parser(
        "train", help="train a model with GRPO on rewards from the sandbox (needs .[rl])"
    )
    train.add_argument("config", type=Path, help="a training config (YAML)")
    train.add_argument("--steps", type=int, help="override the config's steps")
    train.add_argument(
        "--url", help="the sandbox service (overrides sandbox.url; 'local': judge in process)"
    )
    train.add_argument("--out", type=Path, help="override the config's out_dir")
    train.add_argument(
        "--start-service",
        action="store_true",
        help="if the service does not answer at the URL, start one (on a free port) for the run",
    )
    train.add_argument(
        "--blank-observations",
        action="store_true",
        help="the control run of an agent config: the policy sees blanks for what came back",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Train; print the plot's path, then the final held-out pass rate on the last line.

    Exits 1 when the config sets ``target_pass_rate`` and the run ended below it.
    """
    missing = [name for name in RL_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidRequestError(
            f"sandbox train needs the rl extra ({', '.join(missing)} missing): "
            "pip install -e '.[rl]'"
        )
    config = load_config(args.config)
    if args.steps is not None or args.out is not None:
        config = config.model_copy(
            update={"steps": args.steps or config.steps, "out_dir": args.out or config.out_dir}
        )
    if args.blank_observations:
        if config.agent is None:
            raise InvalidRequestError("--blank-observations needs a config with `agent`")
        agent = config.agent.model_copy(update={"blank_observations": True})
        config = config.model_copy(update={"agent": agent})
    if args.url is not None:
        url = None if args.url == "local" else args.url
        config = config.model_copy(
            update={"sandbox": config.sandbox.model_copy(update={"url": url})}
        )
    with contextlib.ExitStack() as stack:
        if args.start_service and config.sandbox.url and not answers(config.sandbox.url, timeout=2):
            service = stack.enter_context(_service())
            config = config.model_copy(
                update={"sandbox": config.sandbox.model_copy(update={"url": service.url})}
            )
        return _train(config, args.no_progress)


@contextlib.contextmanager
def _service() -> Iterator[ServiceProcess]:
    service = ServiceProcess()
    print(f"starting the sandbox service at {service.url} (log: {service.log_path})")
    # A terminated run still stops the service it started (SIGTERM becomes SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        service.wait_ready()
        yield service
    finally:
        service.stop()


def _train(config: TrainConfig, quiet: bool) -> int:
    from tqdm import tqdm

    from .agentic import AgentTrainer
    from .plots import plot_run
    from .trainer import Trainer

    bar = tqdm(total=config.steps, unit="step", disable=quiet, file=sys.stderr)
    held_out: float | None = None

    def progress(record: dict[str, Any]) -> None:
        nonlocal held_out
        bar.update(record["step"] - bar.n)
        held_out = record.get("held_out_pass_rate", held_out)
        shown = {
            "reward": record.get("reward"),
            "held_out": held_out,
            "waiting": record.get("wait_fraction"),
        }
        bar.set_postfix({k: f"{v:.2f}" for k, v in shown.items() if v is not None})

    trainer = (
        AgentTrainer(config, progress=progress)
        if config.agent is not None
        else Trainer(config, progress=progress)
    )
    try:
        history = trainer.train()
    finally:
        trainer.close()
        bar.close()
    plot = plot_run(config.out_dir / "metrics.jsonl", config.out_dir / "training.png")
    evaluated = [r for r in history.metrics if "held_out_pass_rate" in r]
    first, last = evaluated[0], evaluated[-1]
    print(f"metrics: {config.out_dir / 'metrics.jsonl'}")
    print(f"plot: {plot}")
    print(
        f"rollbacks: {len(history.rollbacks)}; held-out pass rate at step 0: "
        f"{first['held_out_pass_rate']:.3f}; wall {history.metrics[-1].get('elapsed_s', '-')} s"
    )
    print(f"final held-out pass rate: {last['held_out_pass_rate']:.3f} (step {last['step']})")
    target = config.target_pass_rate
    return (
        EXIT_BELOW_TARGET if target is not None and last["held_out_pass_rate"] < target else EXIT_OK
    )
