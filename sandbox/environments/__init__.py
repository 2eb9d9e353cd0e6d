"""Per-task environments: a task's own Dockerfile or image, built locally and run hardened.

:mod:`.build` builds (aliases, refusals, the runner layer, the content-hash tag),
:mod:`.store` keeps the records, :mod:`.gc` collects under the disk budget,
:mod:`.derive` makes the policy, :mod:`.upload` unpacks an uploaded build context.
"""

from .build import BuildResult, EnvironmentBuilder
from .config import EnvironmentsConfig, load_environments_config
from .derive import derive_policy
from .spec import EnvironmentSpec, ResourceRequest
from .store import EnvironmentRecord

__all__ = [
    "BuildResult",
    "EnvironmentBuilder",
    "EnvironmentRecord",
    "EnvironmentSpec",
    "EnvironmentsConfig",
    "ResourceRequest",
    "derive_policy",
    "load_environments_config",
]
