"""What a task asks for as its environment: an image or a Dockerfile, and resources.

This is the shape every task format (ours, Harbor, Terminal-Bench) is read into
and what the session API accepts; building and policy derivation read it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ResourceRequest(BaseModel):
    """A task's resource request; lowered to its base policy's bounds, never above them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float | None = Field(default=None, gt=0, le=64, allow_inf_nan=False)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    network_allow: tuple[str, ...] = Field(
        default=(), description="hosts the task needs; empty means no network"
    )


class EnvironmentSpec(BaseModel):
    """A task's own environment: a Dockerfile with its build context, or an image name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dockerfile: Path | None = Field(default=None, description="the Dockerfile (absolute path)")
    context: Path | None = Field(
        default=None, description="the build context (default: the Dockerfile's folder)"
    )
    exclude: tuple[str, ...] = Field(
        default=(),
        description="top-level entries of the context left out of the build (a "
        "Terminal-Bench task's own tests and solution)",
    )
    image: str | None = Field(
        default=None, description="an image name, mapped through the operator's image_aliases"
    )
    base_policy: str = "default"
    resources: ResourceRequest = ResourceRequest()
    root: bool = Field(default=False, description="the agent runs as root (gVisor only)")
    build_timeout_s: float = Field(default=600.0, gt=0, le=7200, allow_inf_nan=False)
    env: dict[str, str] = Field(default_factory=dict)
    build_args: dict[str, str] = Field(
        default_factory=dict, description="--build-arg values (part of the content hash)"
    )
