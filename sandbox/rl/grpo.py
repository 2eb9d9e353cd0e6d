"""The GRPO arithmetic: group-relative advantages, the clipped policy loss, the k3 KL estimate.

Pure tensor functions, tested against hand-worked values.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def group_advantages(
    rewards: torch.Tensor, group_size: int, *, scale: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Each reward minus its group's mean, divided by the group's std unless ``scale`` is off.

    ``rewards`` is flat, ``group_size`` consecutive entries per prompt. A group
    whose rewards are all equal gets zero advantages: it carries no signal.
    """
    groups = rewards.view(-1, group_size)
    centred = groups - groups.mean(dim=1, keepdim=True)
    if scale:
        centred = centred / (groups.std(dim=1, keepdim=True, unbiased=False) + eps)
    return centred.reshape(-1)


def masked_group_advantages(
    rewards: Sequence[float | None], *, scale: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """One group's advantages computed over its judged samples only, and which those are.

    A ``None`` reward (the platform could not judge the sample) is left out of the
    group's mean and std and gets advantage 0 and ``keep`` False; a group with
    fewer than two judged samples has no baseline, so all its advantages are 0.
    """
    keep = torch.tensor([r is not None for r in rewards])
    advantages = torch.zeros(len(rewards))
    judged = [r for r in rewards if r is not None]
    if len(judged) >= 2:
        part = group_advantages(torch.tensor(judged), len(judged), scale=scale)
        advantages[keep] = part
    return advantages, keep


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token KL(policy || reference) estimate k3 = exp(r) - r - 1, r = ref - policy."""
    ratio = ref_logprobs - logprobs
    return torch.exp(ratio) - ratio - 1


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    kl_coef: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The PPO-clip objective, averaged per sequence, then over sequences with a token in ``mask``.

    ``logprobs``/``old_logprobs``/``mask``: (batch, tokens); ``advantages``: (batch,).
    Returns the loss to minimise and statistics: the fraction of tokens whose ratio
    lies outside ``[1 - epsilon_low, 1 + epsilon_high]``, and the mean k3 KL.
    """
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages.unsqueeze(1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    kl = torch.zeros_like(per_token)
    if ref_logprobs is not None and kl_coef:
        kl = k3_kl(logprobs, ref_logprobs)
        per_token = per_token + kl_coef * kl
    tokens = mask.sum(dim=1)
    per_sequence = (per_token * mask).sum(dim=1) / tokens.clamp(min=1)
    loss = per_sequence.sum() / (tokens > 0).sum().clamp(min=1)
    with torch.no_grad():
        outside = (ratio < 1 - epsilon_low) | (ratio > 1 + epsilon_high)
        clip_fraction = (outside * mask).sum() / mask.sum().clamp(min=1)
        mean_kl = (kl * mask).sum() / mask.sum().clamp(min=1)
    return loss, {"clip_fraction": float(clip_fraction), "kl": float(mean_kl)}
