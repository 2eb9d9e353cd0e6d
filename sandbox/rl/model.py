"""The policy model: a tiny GPT-2 over characters built from a config, or a local pretrained LM.

Nothing is downloaded: the tiny model is randomly initialised from a
``GPT2Config`` (dropout off: with dropout on, old and new log-probabilities
disagree and learning stalls); a pretrained model is loaded from a local
directory with ``local_files_only`` (a GGUF file in it is de-quantized on load;
that needs ``accelerate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .config import ModelConfig

PAD, BOS, EOS = 0, 1, 2


class Tokenizer(Protocol):
    pad_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def encode_piece(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class CharTokenizer:
    """One token per character of a fixed charset, plus PAD, BOS, EOS and whole ``words``.

    A word (a multi-character string, like a chat model's tool-call tokens) is one
    token; text is split greedily, the longest word at each position first, else
    one character.
    """

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def __init__(self, charset: str, words: Sequence[str] = ()) -> None:
        self.chars = sorted(set(charset))
        self.words = sorted(set(words) - set(self.chars), key=lambda w: (-len(w), w))
        self.pieces = self.chars + self.words
        self.ids = {piece: index + 3 for index, piece in enumerate(self.pieces)}

    @property
    def vocab_size(self) -> int:
        return len(self.pieces) + 3

    def encode(self, text: str) -> list[int]:
        return [self.bos_id, *self._split(text, strict=True)]

    def encode_piece(self, text: str) -> list[int]:
        """A continuation (no BOS); characters outside the charset are dropped, not refused
        (an observation may hold anything)."""
        return self._split(text, strict=False)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i - 3] for i in ids if i >= 3)

    def _split(self, text: str, *, strict: bool) -> list[int]:
        ids, at, unknown = [], 0, set()
        while at < len(text):
            piece = next((w for w in self.words if text.startswith(w, at)), text[at])
            if piece in self.ids:
                ids.append(self.ids[piece])
            else:
                unknown.add(piece)
            at += len(piece)
        if strict and unknown:
            raise ValueError(f"characters {sorted(unknown)} are not in the model's charset")
        return ids


class PretrainedTokenizer:
    """A Hugging Face tokenizer behind the same small interface."""

    def __init__(self, tokenizer: Any) -> None:
        self.inner = tokenizer
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    def encode(self, text: str) -> list[int]:
        return list(self.inner.encode(text))

    def encode_piece(self, text: str) -> list[int]:
        return list(self.inner.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self.inner.decode(ids, skip_special_tokens=True))


def build(config: ModelConfig, seed: int) -> tuple[torch.nn.Module, Tokenizer]:
    """The model and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    if config.kind == "pretrained":
        assert config.path is not None
        options = {"local_files_only": True, "gguf_file": config.gguf_file}
        tokenizer = AutoTokenizer.from_pretrained(config.path, **options)
        model = AutoModelForCausalLM.from_pretrained(config.path, **options)
        return model, PretrainedTokenizer(tokenizer)
    chars = CharTokenizer(config.charset, config.words)
    gpt2 = GPT2Config(
        vocab_size=chars.vocab_size,
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    return GPT2LMHeadModel(gpt2), chars


@dataclass
class Rollout:
    """One group's completions: token ids and the log-probabilities they were sampled with."""

    prompt_ids: list[int]
    completions: list[list[int]]
    old_logprobs: list[list[float]]


@torch.no_grad()
def sample_group(
    model: torch.nn.Module,
    prompt_ids: list[int],
    *,
    group_size: int,
    max_new_tokens: int,
    temperature: float,
    eos_id: int,
    stop_ids: frozenset[int] = frozenset(),
) -> Rollout:
    """``group_size`` completions of one prompt (sampled; stop at EOS or a stop token)."""
    model.eval()
    prompt = torch.tensor([prompt_ids] * group_size)
    tokens = prompt
    finished = torch.zeros(group_size, dtype=torch.bool)
    chosen: list[torch.Tensor] = []
    chosen_logprobs: list[torch.Tensor] = []
    past = None
    step_input = tokens
    attention = torch.ones_like(tokens)
    for _ in range(max_new_tokens):
        out = model(input_ids=step_input, attention_mask=attention, cache=past, use_cache=True)
        past = out.cache
        logits = out.logits[:, -1, :] / temperature
        logprobs = torch.log_softmax(logits, dim=-1)
        token = torch.multinomial(logprobs.exp(), 1).squeeze(1)
        chosen.append(token)
        chosen_logprobs.append(logprobs.gather(1, token.unsqueeze(1)).squeeze(1))
        finished |= (token == eos_id) | torch.isin(token, torch.tensor(sorted(stop_ids) or [-1]))
        step_input = token.unsqueeze(1)
        attention = torch.cat([attention, torch.ones_like(step_input)], dim=1)
        if bool(finished.all()):
            break
    ids = torch.stack(chosen, dim=1)
    lps = torch.stack(chosen_logprobs, dim=1)
    completions, old = [], []
    for row in range(group_size):
        seq = ids[row].tolist()
        cut = len(seq)
        for index, token in enumerate(seq):
            if token == eos_id or token in stop_ids:
                cut = index + 1
                break
        completions.append(seq[:cut])
        old.append(lps[row, :cut].tolist())
    return Rollout(list(prompt_ids), completions, old)


def completion_logprobs(
    model: torch.nn.Module, rollout: Rollout, pad_id: int, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities of each completion's tokens under ``model`` (with grad), and a mask.

    The logits are divided by the sampling ``temperature``, as when the completions
    were sampled: else the PPO ratio of an unchanged model would not be 1.
    """
    width = max(len(c) for c in rollout.completions)
    rows = [rollout.prompt_ids + c + [pad_id] * (width - len(c)) for c in rollout.completions]
    inputs = torch.tensor(rows)
    mask = torch.tensor([[1.0] * len(c) + [0.0] * (width - len(c)) for c in rollout.completions])
    attention = torch.cat([torch.ones(len(rows), len(rollout.prompt_ids)), mask], dim=1)
    logits = model(input_ids=inputs, attention_mask=attention).logits
    logits = logits[:, len(rollout.prompt_ids) - 1 : -1, :] / temperature
    logprobs = torch.log_softmax(logits, dim=-1)
    targets = inputs[:, len(rollout.prompt_ids) :]
    return logprobs.gather(2, targets.unsqueeze(2)).squeeze(2), mask


@torch.no_grad()
def sample_turns(
    model: torch.nn.Module,
    contexts: list[list[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    pad_id: int,
    stop_ids: frozenset[int],
    banned_ids: frozenset[int] = frozenset(),
) -> list[tuple[list[int], list[float]]]:
    """One turn for each context (of any lengths, batched): its tokens and their log-probs.

    Contexts are left-padded, with positions counted from each one's first real
    token, so a row samples as it would alone. A row stops after a token in
    ``stop_ids``; ``banned_ids`` (PAD, BOS) are never sampled. The log-probs are
    the sampling policy's (at ``temperature``): the PPO ratio's denominator.
    """
    model.eval()
    width = max(len(c) for c in contexts)
    inputs = torch.tensor([[pad_id] * (width - len(c)) + c for c in contexts])
    attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    banned = torch.tensor(sorted(banned_ids), dtype=torch.long)
    stops = torch.tensor(sorted(stop_ids) or [-1])
    finished = torch.zeros(len(contexts), dtype=torch.bool)
    chosen: list[torch.Tensor] = []
    chosen_logprobs: list[torch.Tensor] = []
    past = None
    step_input = inputs
    for _ in range(max_new_tokens):
        out = model(
            input_ids=step_input,
            attention_mask=attention,
            position_ids=positions,
            cache=past,
            use_cache=True,
        )
        past = out.cache
        logits = out.logits[:, -1, :] / temperature
        if len(banned):
            logits[:, banned] = float("-inf")
        logprobs = torch.log_softmax(logits, dim=-1)
        token = torch.multinomial(logprobs.exp(), 1).squeeze(1)
        chosen.append(token)
        chosen_logprobs.append(logprobs.gather(1, token.unsqueeze(1)).squeeze(1))
        finished |= torch.isin(token, stops)
        if bool(finished.all()):
            break
        step_input = token.unsqueeze(1)
        attention = torch.cat([attention, torch.ones_like(step_input)], dim=1)
        positions = positions[:, -1:] + 1
    ids = torch.stack(chosen, dim=1).tolist()
    lps = torch.stack(chosen_logprobs, dim=1).tolist()
    turns = []
    for row, lp in zip(ids, lps, strict=True):
        cut = next((i + 1 for i, t in enumerate(row) if t in stop_ids), len(row))
        turns.append((row[:cut], lp[:cut]))
    return turns


def sequence_logprobs(
    model: torch.nn.Module,
    sequences: list[list[int]],
    pad_id: int,
    temperature: float,
    banned_ids: frozenset[int] = frozenset(),
) -> torch.Tensor:
    """Log-probabilities (with grad) of tokens ``1..`` of each sequence under ``model``.

    Shape (batch, longest - 1), right-padded (padding's values are meaningless:
    mask them). Logits are divided by the sampling ``temperature`` and ``banned_ids``
    excluded, exactly as in :func:`sample_turns`: an unchanged model's ratio is 1.
    """
    width = max(len(s) for s in sequences)
    inputs = torch.tensor([s + [pad_id] * (width - len(s)) for s in sequences])
    attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
    logits = model(input_ids=inputs, attention_mask=attention).logits[:, :-1, :] / temperature
    if banned_ids:
        logits = logits.index_fill(2, torch.tensor(sorted(banned_ids)), float("-inf"))
    logprobs = torch.log_softmax(logits, dim=-1)
    return logprobs.gather(2, inputs[:, 1:].unsqueeze(2)).squeeze(2)
