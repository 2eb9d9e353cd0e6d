"""Reward functions for TRL and verl: the stable place users name in trainer configs.

``sandbox.rewards.trl_reward`` (TRL's ``reward_funcs``) and
``sandbox.rewards.compute_score`` (verl's
``reward.custom_reward_function.path=sandbox/rewards.py``, ``name=compute_score``)
live in :mod:`sandbox.integrations.rewards`; this module re-exports them, and keeps
working when verl loads it by file path (its imports are absolute).
"""

from sandbox.integrations.rewards import (
    INFRA_ATTEMPTS,
    KEY_ENV,
    URL_ENV,
    RewardOptions,
    code_from_response,
    completion_text,
    compute_score,
    judge_item,
    sandbox_reward,
    trl_reward,
)

__all__ = [
    "INFRA_ATTEMPTS",
    "KEY_ENV",
    "URL_ENV",
    "RewardOptions",
    "code_from_response",
    "completion_text",
    "compute_score",
    "judge_item",
    "sandbox_reward",
    "trl_reward",
]
