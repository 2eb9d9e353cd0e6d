"""The training configuration: one YAML file, validated as strictly as a policy."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import PolicyError
from ..policy import load_yaml_mapping

MAX_CONFIG_BYTES = 64 << 10


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Model):
    """A tiny GPT-2 built from scratch (characters as tokens), or a local pretrained model."""

    kind: Literal["tiny-gpt2", "pretrained"] = "tiny-gpt2"
    path: Path | None = Field(default=None, description="A local model directory (pretrained).")
    gguf_file: str | None = Field(
        default=None, description="A GGUF file in `path` to load (de-quantized) instead."
    )
    charset: str = Field(
        default="0123456789()+-*/'\"abcdefghijklmnopqrstuvwxyz _,.:=#\n", min_length=1
    )
    words: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="Multi-character strings the tiny model's tokenizer keeps as one token "
        "each (e.g. a tool call's text), matched before single characters.",
    )
    n_layer: int = Field(default=2, ge=1, le=48)
    n_head: int = Field(default=4, ge=1, le=64)
    n_embd: int = Field(default=64, ge=8, le=4096)
    n_positions: int = Field(default=64, ge=8, le=8192)

    @model_validator(mode="after")
    def _path_for_pretrained(self) -> ModelConfig:
        if self.kind == "pretrained" and self.path is None:
            raise ValueError("a pretrained model needs its local directory in `path`")
        if self.n_embd % self.n_head:
            raise ValueError("n_embd must be a multiple of n_head")
        return self


class DomainConfig(_Model):
    """One task family in the mix, with its sampling weight and difficulty tier."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    family: Literal["print_target"] = "print_target"
    targets: list[str] = Field(min_length=1, max_length=10_000)
    weight: float = Field(default=1.0, gt=0)
    tier: Literal["easy", "medium", "hard"] = "easy"


class GrpoConfig(_Model):
    group_size: int = Field(default=16, ge=2, le=1024)
    prompts_per_step: int = Field(default=8, ge=1, le=4096)
    max_new_tokens: int = Field(default=4, ge=1, le=4096)
    temperature: float = Field(default=1.0, gt=0, le=10)
    learning_rate: float = Field(default=3e-3, gt=0, le=1)
    weight_decay: float = Field(default=0.0, ge=0, le=1)
    epsilon_low: float = Field(default=0.2, ge=0, le=1)
    epsilon_high: float = Field(default=0.2, ge=0, le=10)
    scale_rewards: bool = Field(default=True, description="False: the no-std variant.")
    kl_coef: float = Field(default=0.0, ge=0, description="KL to a frozen reference (k3).")
    max_grad_norm: float = Field(default=1.0, gt=0)
    updates_per_batch: int = Field(default=1, ge=1, le=64)


class SandboxConfig(_Model):
    url: str | None = Field(default=None, description="The service; None judges in process.")
    api_key_env: str | None = None
    policy: str = "default"
    reward: Literal["binary", "fraction"] = "binary"
    test_timeout_s: float = Field(default=2.0, gt=0, le=60)
    dedupe: bool = Field(
        default=True, description="Run identical requests of one batch once; share the verdict."
    )
    concurrency: int = Field(default=64, ge=1, le=1024)


class AgentConfig(_Model):
    """Multi-turn episodes of evaluator tasks (:mod:`sandbox.rl.agentic`).

    A rollout is an episode: the policy's turns are parsed into tool calls
    (``tool_format``), run in the episode's sandbox session, and the
    observations appended to its context, until it finishes or a budget ends
    it; the task's hidden tests give the reward.
    """

    tasks: list[Path] = Field(
        min_length=1,
        max_length=256,
        description="Task directories (any format load_task reads), or directories of them.",
    )
    held_out: list[Path] = Field(
        min_length=1, max_length=256, description="Tasks only evaluated on, never trained on."
    )
    tool_format: Literal["lines", "json"] = "lines"
    prompt: str = Field(
        default="{instruction}\n",
        description="The episode's first text; `{instruction}` is the task's instruction.",
    )
    turn_prefixes: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Text written before turn i's policy tokens (the last repeats; none "
        "if empty): a template, like a chat template's assistant header, not trained on.",
    )
    opening: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="Tool calls (in tool_format) run when an episode opens, before the "
        "policy's first turn: their text and observations start the context, not trained on.",
    )
    max_turns: int = Field(default=4, ge=1, le=256)
    max_turn_tokens: int = Field(default=32, ge=1, le=8192)
    max_tokens: int = Field(
        default=256, ge=8, le=131072, description="The whole episode's context, in tokens."
    )
    max_output_chars: int = Field(
        default=256, ge=16, le=1 << 20, description="Caps each observation (per stream)."
    )
    episode_timeout_s: float | None = Field(default=None, gt=0, le=3600)
    blank_observations: bool = Field(
        default=False,
        description="The control run: every observation's characters become spaces "
        "(same length; line breaks kept), so the policy never learns what came back.",
    )
    max_staleness: int = Field(
        default=1,
        ge=0,
        le=64,
        description="How many policy versions generation may run ahead of training.",
    )


class TrainConfig(_Model):
    """Everything ``sandbox train`` needs."""

    model: ModelConfig = ModelConfig()
    domains: list[DomainConfig] = Field(default_factory=list, max_length=64)
    held_out: list[DomainConfig] = Field(default_factory=list, max_length=64)
    agent: AgentConfig | None = Field(
        default=None, description="Train on multi-turn episodes of tasks instead of domains."
    )
    grpo: GrpoConfig = GrpoConfig()
    sandbox: SandboxConfig = SandboxConfig()
    steps: int = Field(default=200, ge=1, le=10_000_000)
    eval_every: int = Field(default=10, ge=1)
    eval_samples: int = Field(default=4, ge=1, le=1024, description="Samples per held-out prompt.")
    rollback_min_drop: float = Field(
        default=0.1, ge=0, le=1, description="A held-out drop smaller than this never rolls back."
    )
    rollback_alpha: float = Field(
        default=0.05, gt=0, lt=1, description="Significance of the gate's test for a rollback."
    )
    checkpoint_every: int = Field(default=10, ge=1)
    out_dir: Path = Path("runs/train")
    seed: int = 0
    target_pass_rate: float | None = Field(
        default=None, ge=0, le=1, description="Stop early once the held-out pass rate reaches it."
    )
    time_budget_s: float | None = Field(
        default=None, gt=0, description="Stop (after a last evaluation) once this has passed."
    )

    @model_validator(mode="after")
    def _what_to_train_on(self) -> TrainConfig:
        if self.agent is None and not (self.domains and self.held_out):
            raise ValueError("set `domains` and `held_out` (single-turn), or `agent` (episodes)")
        if self.agent is not None:
            if self.domains or self.held_out:
                raise ValueError("`agent` trains on its tasks: leave out `domains`/`held_out`")
            if self.sandbox.url is None:
                raise ValueError("episodes run through the service: set `sandbox.url`")
            if self.model.kind == "tiny-gpt2" and self.agent.max_tokens > self.model.n_positions:
                raise ValueError(
                    f"agent.max_tokens ({self.agent.max_tokens}) is more than the model's "
                    f"n_positions ({self.model.n_positions})"
                )
        return self


def load_config(path: str | Path) -> TrainConfig:
    """Read and validate a training config; errors name the file and the key."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PolicyError(f"cannot read: {exc.strerror}", source=source) from None
    if len(text) > MAX_CONFIG_BYTES:
        raise PolicyError(f"larger than {MAX_CONFIG_BYTES} bytes", source=source)
    data = load_yaml_mapping(text, source)
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise PolicyError(first["msg"], source=source, key=key) from None
