"""The GRPO arithmetic against hand-worked values, and the update's handling of dropped samples."""

from __future__ import annotations

import math

import pytest
import torch

from sandbox.rl.grpo import clipped_policy_loss, group_advantages, k3_kl, masked_group_advantages

LOG = math.log


def test_group_advantages_by_hand() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    # Groups [1, 0], [0, 1], [1, 1]: means 0.5, 0.5, 1; population stds 0.5, 0.5, 0.
    scaled = group_advantages(rewards, 2)
    assert scaled.tolist() == pytest.approx([1, -1, -1, 1, 0, 0], abs=1e-5)
    plain = group_advantages(rewards, 2, scale=False)
    assert plain.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0, 0])
    # A group of four: mean 0.25, std sqrt(0.1875).
    four = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4)
    assert four.tolist() == pytest.approx(
        [0.75 / 0.4330127, -0.25 / 0.4330127] + [-0.57735] * 2, abs=1e-4
    )


def test_k3_by_hand() -> None:
    # r = ref - policy = log 2: exp(r) - r - 1 = 2 - log 2 - 1.
    value = k3_kl(torch.tensor([0.0]), torch.tensor([LOG(2)]))
    assert value.item() == pytest.approx(1 - LOG(2))
    assert k3_kl(torch.tensor([-1.3]), torch.tensor([-1.3])).item() == 0


def _loss(ratios: list[float], advantage: float, mask: list[float], **kwargs: float):
    logprobs = torch.tensor([[LOG(r) for r in ratios]], requires_grad=True)
    old = torch.zeros(1, len(ratios))
    loss, stats = clipped_policy_loss(
        logprobs, old, torch.tensor([advantage]), torch.tensor([mask]), **kwargs
    )
    return loss, stats, logprobs


def test_clipped_loss_by_hand() -> None:
    # Ratios 1.5 and 0.5, advantage +1, epsilons 0.2: min(1.5, 1.2) and min(0.5, 0.8),
    # so the loss is -(1.2 + 0.5) / 2; both ratios are outside [0.8, 1.2].
    loss, stats, logprobs = _loss([1.5, 0.5], 1.0, [1, 1])
    assert loss.item() == pytest.approx(-0.85)
    assert stats["clip_fraction"] == 1.0
    loss.backward()
    # The clipped token (1.5 > 1.2 with a positive advantage) gets no gradient; the
    # other gets d(-ratio/2)/d(logprob) = -ratio/2.
    assert logprobs.grad is not None
    assert logprobs.grad[0].tolist() == pytest.approx([0.0, -0.25])
    # Advantage -1: min(-1.5, -1.2) and min(-0.5, -0.8): loss (1.5 + 0.8) / 2.
    assert _loss([1.5, 0.5], -1.0, [1, 1])[0].item() == pytest.approx(1.15)
    # A wider upper epsilon (0.6) lets 1.5 through: -(1.5 + 0.5) / 2, half the tokens clipped.
    loss, stats, _ = _loss([1.5, 0.5], 1.0, [1, 1], epsilon_high=0.6)
    assert loss.item() == pytest.approx(-1.0)
    assert stats["clip_fraction"] == 0.5
    # A masked token counts for nothing: only the 1.2 is left.
    assert _loss([1.5, 0.5], 1.0, [1, 0])[0].item() == pytest.approx(-1.2)


def test_kl_term_by_hand() -> None:
    logprobs = torch.zeros(1, 2, requires_grad=True)
    ref = torch.full((1, 2), LOG(2))
    loss, stats = clipped_policy_loss(
        logprobs,
        torch.zeros(1, 2),
        torch.tensor([0.0]),
        torch.ones(1, 2),
        kl_coef=0.1,
        ref_logprobs=ref,
    )
    assert stats["kl"] == pytest.approx(1 - LOG(2))
    assert loss.item() == pytest.approx(0.1 * (1 - LOG(2)))


def test_masked_group_advantages_leave_unjudged_samples_out() -> None:
    advantages, keep = masked_group_advantages([1.0, None, 0.0, None])
    # The judged pair [1, 0] alone: mean 0.5, std 0.5.
    assert advantages.tolist() == pytest.approx([1, 0, -1, 0], abs=1e-5)
    assert keep.tolist() == [True, False, True, False]
    # Scoring the failures 0 instead would have shifted the mean to 0.25.
    zeroed = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4)
    assert zeroed[2].item() != pytest.approx(advantages[2].item(), abs=0.1)
    # One judged sample has no baseline: no signal.
    assert masked_group_advantages([None, 1.0, None])[0].tolist() == [0, 0, 0]


def test_a_fully_masked_sequence_does_not_dilute_the_loss() -> None:
    # Two sequences, the second wholly masked: the loss is the first one's alone.
    logprobs = torch.tensor([[LOG(1.1)], [LOG(3.0)]])
    loss, _ = clipped_policy_loss(
        logprobs, torch.zeros(2, 1), torch.tensor([1.0, 5.0]), torch.tensor([[1.0], [0.0]])
    )
    assert loss.item() == pytest.approx(-1.1)
