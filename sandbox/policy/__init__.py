"""Security policies: the frozen model, the YAML loader, validation and lint.

The modules, one job each: :mod:`.limits` (named bounds and defaults), :mod:`.model`
(the frozen model), :mod:`.paths` (mount and target checks), :mod:`.yaml_loader` (the
hardened YAML loader tasks and configs reuse), :mod:`.loader` (policy files and
``extends:``), :mod:`.messages` (refusals that name file, key and fix; other config
files reuse them through :func:`config_error`), :mod:`.lint`, :mod:`.versions` (each
policy's digest and load time, and what a reload changes). The public names are
re-exported here.

A policy is a YAML file (``policies/<name>.yaml``) that fixes what one sandbox
may use: resources, filesystem, network, runtime, uid/gid, environment and
pool sizing. Loading is strict, and nothing falls back to a permissive default:

* the file is plain YAML data: no tags, anchors, aliases, directives, merge
  keys or duplicate keys, one document, a mapping at the top, at most
  :data:`MAX_POLICY_BYTES`;
* every key is known (``extra="forbid"``), every value has exactly the right
  type (no ``"512"`` for an int) and lies within the bounds below;
* dangerous settings (privileged, capabilities, host namespaces, devices,
  writable root, root uid, host network, the Docker socket, ...) are refused
  with a message saying why;
* host mounts are read-only, must sit under a root listed in
  ``SANDBOX_MOUNT_ALLOWLIST``, may not be, contain or follow a link to a
  system path, and may have no other filesystem mounted below them (a
  read-only bind mount is not recursive on Docker 20.10).

Every refusal is a :class:`~sandbox.errors.PolicyError` that names the file,
the dotted key and what to change. A request may only *lower* limits, through
:class:`LimitOverrides` and :func:`effective_limits`.
"""

from .keys import _KeyedValueError as KeyedValueError
from .limits import MOUNT_ALLOWLIST_ENV
from .lint import lint_policy
from .loader import (
    extends_chain,
    load_policy,
    load_policy_dir,
    parse_config,
    parse_policy,
    policy_file,
    read_config_file,
)
from .messages import config_error
from .model import (
    AllowRule,
    Env,
    ExtraTmpfs,
    Filesystem,
    LimitOverrides,
    Mount,
    Network,
    Policy,
    PoolSettings,
    Resources,
    TmpfsSpec,
    User,
    effective_limits,
)
from .versions import PolicyChange, PolicyChanges, PolicyVersion, compare_versions, stamp_versions
from .yaml_loader import load_yaml_mapping

__all__ = [
    "MOUNT_ALLOWLIST_ENV",
    "AllowRule",
    "Env",
    "ExtraTmpfs",
    "Filesystem",
    "KeyedValueError",
    "LimitOverrides",
    "Mount",
    "Network",
    "Policy",
    "PolicyChange",
    "PolicyChanges",
    "PolicyVersion",
    "PoolSettings",
    "Resources",
    "TmpfsSpec",
    "User",
    "compare_versions",
    "config_error",
    "effective_limits",
    "extends_chain",
    "lint_policy",
    "load_policy",
    "load_policy_dir",
    "load_yaml_mapping",
    "parse_config",
    "parse_policy",
    "policy_file",
    "read_config_file",
    "stamp_versions",
]
