"""The sandbox interface every backend implements, and the backend interface that makes them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from ..policy import Policy
from ..results import ExecLimits, ExecResult

# The container's layout, the same in every backend: the sandbox's workspace, the
# judge's private directory, and the harness programs shipped with the runner.
WORKDIR = "/workspace"
JUDGE_DIR = "/judge"
HARNESS_DIR = "/opt/sandbox/runner/harness"


class Sandbox(ABC):
    """One isolated container with a runner inside, bound to at most one tenant."""

    id: str
    image: str
    policy: Policy

    @abstractmethod
    async def exec(
        self,
        argv: Sequence[str],
        *,
        limits: ExecLimits,
        stdin: bytes = b"",
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes] | None = None,
        fetch: Sequence[str] = (),
        keep_processes: bool = False,
        reset_after: bool = False,
        peer: Mapping[str, Any] | None = None,
        role: str = "sandbox",
        channel: bool = False,
    ) -> ExecResult:
        """Run ``argv`` as the untrusted user after writing ``files`` (relative to ``cwd``).

        A non-zero exit, a timeout or an OOM kill is reported in the result; an
        exception means the platform failed (:class:`~sandbox.errors.SandboxError`).
        ``fetch`` names files to read back afterwards; ``keep_processes`` leaves
        background processes running (sessions); ``reset_after`` lets the sandbox
        start its reset as soon as the result is out: the next :meth:`reset` then
        only collects its outcome. With ``peer`` (``argv``, ``cwd``, ``env``,
        ``files``) ``argv`` runs as the *judge* uid and the peer as the sandbox uid,
        joined by a socket on fd 3; the peer's exit and output are in ``result.peer``.
        ``role="judge"`` runs ``argv`` as the judge uid (hidden tests' own files).
        ``channel`` gives ``argv`` the runner's report channel (a nonce on fd 3, a
        pipe on fd 4, see ``runner/harness/pytest_channel.py``); what came back
        on it is ``result.channel``.
        """

    @abstractmethod
    async def exec_cases(
        self,
        argv: Sequence[str],
        stdins: Sequence[bytes],
        *,
        limits: ExecLimits,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes] | None = None,
        reset_after: bool = False,
        stop_on_failure: bool = False,
    ) -> list[ExecResult]:
        """Run ``argv`` once per entry of ``stdins``, in turn, in as few requests to the
        sandbox as the output they may bring back allows.

        Each run is what :meth:`exec` would make of it (its own processes and limits,
        leftovers killed after it); ``files`` are written before the first. One result per
        stdin, in order; with ``stop_on_failure`` none after the first run whose status is
        not ``ok`` (a non-zero exit, a timeout, a limit). A container that the OOM killer
        took with it (gVisor) cannot say which run did it: every result is then the
        memory limit's.
        """

    @abstractmethod
    async def reset(self) -> list[str]:
        """Kill leftovers, wipe writable directories and verify; returns the problems found."""

    @abstractmethod
    async def ping(self) -> bool:
        """True when the container and its runner answer."""

    @abstractmethod
    async def close(self) -> None:
        """Destroy the sandbox; idempotent."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """False once the sandbox is known to be dead or closed."""


class Backend(ABC):
    """Makes sandboxes from an image and a policy."""

    @abstractmethod
    async def create(self, image: str, policy: Policy) -> Sandbox:
        """Start a new sandbox, ready for its first execution."""

    @abstractmethod
    async def remove_orphans(self) -> int:
        """Remove sandboxes left by earlier runs of the service; returns how many."""

    @abstractmethod
    async def close(self) -> None:
        """Remove every sandbox this backend made; idempotent."""
