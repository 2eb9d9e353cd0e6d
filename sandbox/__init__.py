"""Secure code-execution sandboxes for RL post-training and coding-agent evaluation.

The public names live here; modules below are implementation detail unless
their docstring says otherwise.
"""

from .client import AsyncSandboxClient, SandboxClient
from .errors import (
    CapacityError,
    ContainerLostError,
    EngineError,
    InfrastructureError,
    InvalidRequestError,
    LimitError,
    NotFoundError,
    PolicyError,
    SandboxError,
    SandboxTimeoutError,
    ServiceUnreachableError,
)
from .execution import ExecutionService, RunRequest
from .platform import Platform, PlatformSettings
from .policy import LimitOverrides, Policy, effective_limits, load_policy, load_policy_dir
from .pool import Lease, Pool, PoolStatus
from .results import ExecLimits, ExecResult, ExecStatus, ResourceUsage, RunResult

__all__ = [
    "AsyncSandboxClient",
    "CapacityError",
    "ContainerLostError",
    "EngineError",
    "ExecLimits",
    "ExecResult",
    "ExecStatus",
    "ExecutionService",
    "InfrastructureError",
    "InvalidRequestError",
    "Lease",
    "LimitError",
    "LimitOverrides",
    "NotFoundError",
    "Platform",
    "PlatformSettings",
    "Policy",
    "PolicyError",
    "Pool",
    "PoolStatus",
    "ResourceUsage",
    "RunRequest",
    "RunResult",
    "SandboxClient",
    "SandboxError",
    "SandboxTimeoutError",
    "ServiceUnreachableError",
    "effective_limits",
    "load_policy",
    "load_policy_dir",
]
