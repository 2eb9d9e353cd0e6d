"""Secure code-execution sandboxes for RL post-training and coding-agent evaluation.

The public names live here; modules below are implementation detail unless
their docstring says otherwise.
"""

from .client import AsyncSandboxClient, SandboxClient
from .core.execution import ExecutionService, RunRequest
from .core.pool import Lease, Pool, PoolStatus
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
from .policy import LimitOverrides, Policy, effective_limits, load_policy, load_policy_dir
from .results import ExecLimits, ExecResult, ExecStatus, ResourceUsage, RunResult
from .service.platform import Platform, PlatformSettings

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
