"""Task families for training, and the domain-mixed loader that samples prompts from them.

``print_target``: the prompt is the start of a Python program,
``# print 7`` then ``print(``; the model completes the call. The program is
judged by the sandbox with an I/O test: its output must be the target. Nothing
but the sandbox's verdict decides the reward.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sandbox.judge.judge import JudgeRequest

from .config import DomainConfig, SandboxConfig


@dataclass(frozen=True)
class Prompt:
    domain: str
    tier: str
    text: str
    target: str


def print_target_prompt(domain: DomainConfig, target: str) -> Prompt:
    return Prompt(domain.name, domain.tier, f"# print {target}\nprint(", target)


def judge_request(prompt: Prompt, completion: str, sandbox: SandboxConfig) -> JudgeRequest:
    """The program (prompt + completion, up to its first line break) and its hidden test."""
    program = prompt.text + completion.split("\n", 1)[0] + "\n"
    return JudgeRequest.model_validate(
        {
            "language": "python",
            "code": program,
            "policy": sandbox.policy,
            "reward": sandbox.reward,
            "test_timeout_s": sandbox.test_timeout_s,
            "tests": {"kind": "io", "cases": [{"stdin": "", "expected_stdout": prompt.target}]},
        }
    )


class DomainMix:
    """Samples prompts: a domain by weight, then one of its targets uniformly."""

    def __init__(self, domains: list[DomainConfig], seed: int) -> None:
        self.domains = domains
        self.random = random.Random(seed)

    def sample(self, count: int) -> list[Prompt]:
        weights = [d.weight for d in self.domains]
        picked = self.random.choices(self.domains, weights=weights, k=count)
        return [print_target_prompt(d, self.random.choice(d.targets)) for d in picked]

    def every_prompt(self) -> list[Prompt]:
        """Each target of each domain once (the held-out set)."""
        return [print_target_prompt(d, t) for d in self.domains for t in d.targets]
