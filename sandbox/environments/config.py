"""The operator's environments config: image aliases and the disk budget of built environments.

A YAML file (validated like policies: a refusal names the file, the key and the
fix)::

    image_aliases:
      "ubuntu:24.04": sandbox-base
      "python:3.13-slim": sandbox-python
    disk_budget_mb: 20480
    max_context_mb: 512

An alias target is one of our images (``sandbox-base``, ``sandbox-<name>``: the
tag of the current sources, see :func:`sandbox.host.images.resolve_image`) or any
image reference present in the local engine. Names are compared normalised
(``docker.io/library/ubuntu`` is ``ubuntu:latest``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sandbox.policy import AllowRule, parse_config, read_config_file

CONFIG_ENV = "SANDBOX_ENVIRONMENTS_CONFIG"
DEFAULT_DISK_BUDGET_MB = 20 * 1024
MAX_ALIASES = 256
# A Docker image reference: [registry/]path[:tag][@digest], lower case path.
_REFERENCE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)


def normalise_reference(name: str) -> str:
    """``ubuntu`` -> ``ubuntu:latest``; ``docker.io/library/x:1`` -> ``x:1``."""
    ref = name.strip()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    ref = ref.removeprefix("library/")
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        ref += ":latest"
    return ref


def check_reference(name: str) -> str:
    """``name`` if it is an image reference, else :class:`ValueError` saying what one is."""
    if not _REFERENCE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not an image reference; write e.g. 'ubuntu:24.04' or 'sandbox-python'"
        )
    return name


class EnvironmentsConfig(BaseModel):
    """What the operator sets for per-task environments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image_aliases: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_ALIASES,
        description="FROM image -> local image (ours: sandbox-base, sandbox-python, ...)",
    )
    disk_budget_mb: int = Field(
        default=DEFAULT_DISK_BUDGET_MB,
        ge=1,
        description="built environments above this are removed least recently used first "
        "(after each new build; the one just built is kept whatever its size)",
    )

    max_context_mb: int = Field(
        default=512, ge=1, le=8192, description="a build context may unpack to at most this"
    )
    build_network: Literal["none", "allowlist", "bridge"] = Field(
        default="none",
        description="none: build steps have no network (only loopback). allowlist: each "
        "build gets an internal network whose only way out is the service's egress proxy, "
        "which lets through what build_allow names (e.g. the package registries apt-get and "
        "pip use). bridge: they reach what the engine's default bridge reaches (the internet, "
        "and the host's address on the bridge); only for tenants you trust",
    )
    build_allow: tuple[AllowRule, ...] = Field(
        default=(),
        max_length=256,
        description="with build_network: allowlist, where build steps may go through the "
        "proxy: rules as a policy's network.allow (host, domain or cidr, and ports)",
    )
    build_memory_mb: int = Field(
        default=2048,
        ge=64,
        le=16384,
        description="the memory (swap none) each build step may use; a step past it is killed",
    )
    build_cpus: float = Field(
        default=1.0,
        ge=0.01,
        le=1024,
        allow_inf_nan=False,
        description="the CPUs each build step may use (a CFS quota of that many CPUs)",
    )
    build_pids: int = Field(
        default=1024,
        ge=0,
        le=1 << 22,
        description="the processes and threads one build's steps may have at once (a cgroup "
        "of its own; needs the engine's cgroupfs driver and a writable cgroup file system; "
        "under gVisor also each step's RLIMIT_NPROC); 0: no limit",
    )

    build_runtime: Literal["gvisor", "engine"] = Field(
        default="gvisor",
        description="gvisor: every build step runs under gVisor, root only in gVisor's "
        "kernel (the engine's default runtime must be sandbox-build, which `sandbox engine "
        "ensure` installs; builds are refused otherwise). engine: under the engine's "
        "default runtime as it is (runc on a stock engine: a step is root with Docker's "
        "default capabilities on the host's kernel); only for tenants you trust",
    )

    @model_validator(mode="after")
    def _allow_needs_allowlist(self) -> EnvironmentsConfig:
        if self.build_network == "allowlist" and not self.build_allow:
            raise ValueError(
                "build_network: allowlist needs build_allow: the destinations build steps "
                "may reach (e.g. [{host: deb.debian.org}, {host: pypi.org}, "
                "{host: files.pythonhosted.org}]); or set build_network: none"
            )
        if self.build_allow and self.build_network != "allowlist":
            raise ValueError(
                f"build_allow is only read with build_network: allowlist (it is "
                f"{self.build_network!r}); set build_network: allowlist or remove build_allow"
            )
        return self

    @field_validator("image_aliases")
    @classmethod
    def _aliases(cls, value: dict[str, str]) -> dict[str, str]:
        aliases: dict[str, str] = {}
        for source, target in value.items():
            check_reference(source)
            check_reference(target)
            key = normalise_reference(source)
            if key in aliases:
                raise ValueError(f"{source!r} is listed twice (as {key!r}); keep one")
            aliases[key] = target
        return aliases

    def alias(self, name: str) -> str | None:
        """The alias target of image ``name``, or None."""
        return self.image_aliases.get(normalise_reference(name))


def parse_environments_config(text: str, *, source: str) -> EnvironmentsConfig:
    """Validate a config's YAML text; :class:`~sandbox.errors.PolicyError` names key and fix."""
    return parse_config(text, source=source, model=EnvironmentsConfig)


def load_environments_config(path: str | Path | None = None) -> EnvironmentsConfig:
    """Read the config at ``path`` (default: ``$SANDBOX_ENVIRONMENTS_CONFIG``; none: defaults)."""
    chosen = path if path is not None else os.environ.get(CONFIG_ENV)
    if not chosen:
        return EnvironmentsConfig()
    source = str(chosen)
    return parse_environments_config(read_config_file(Path(chosen), source), source=source)
