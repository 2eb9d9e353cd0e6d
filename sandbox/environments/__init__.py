"""Per-task environments: a task's own Dockerfile or image, built locally and run hardened."""

from .spec import EnvironmentSpec, ResourceRequest

__all__ = ["EnvironmentSpec", "ResourceRequest"]
