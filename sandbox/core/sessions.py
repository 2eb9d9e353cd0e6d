"""Multi-step sessions for agents: one sandbox held across many commands.

A session checks a sandbox out of the pool for its tenant and keeps it until
it is closed or has been idle for its policy's ``pool.session_idle_ttl_s``.
Commands run one at a time; background processes a command starts live on
between commands (until the session ends). Files are written as the sandbox
user and read back as bytes with links refused, only below ``/workspace`` and
``/tmp``, while the background processes run on (the runner's no-follow walk is
what makes that safe). What the sandbox user may not do (a file it cannot write, a
directory it cannot enter) is the client's :class:`InvalidRequestError`, and the
session goes on.

A snapshot is the workspace as a tar archive, made and unpacked inside the
sandbox by the unprivileged user (the host never extracts it); a new session
can start from it, so one task state can be explored many times. Running
processes are not part of a snapshot. Snapshots are kept by a
:class:`~sandbox.core.snapshots.SnapshotStore` (on disk, per-tenant quotas, a
time to live).

Session and snapshot ids are unguessable and scoped to their tenant: another
tenant's id is simply not found.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sandbox.backends.base import HARNESS_DIR, JUDGE_DIR, WORKDIR
from sandbox.core.agent_code import (
    AGENT_BIN,
    AGENT_RUN,
    VERIFIER_BIN_COMMAND,
    agent_peer,
    bin_command,
    verifier_peer,
)
from sandbox.core.argv import path_arg
from sandbox.core.execution import (
    BASE_ENV,
    ExecutionService,
    exec_limits,
    sandbox_env,
)
from sandbox.core.pool import Lease
from sandbox.core.snapshots import SnapshotRecord, SnapshotStore
from sandbox.core.validation import (
    CLASS_NAME_PATTERN,
    FileMap,
    RelativePath,
    check_relative_path,
    decode_files,
)
from sandbox.environments import EnvironmentBuilder, ResourceRequest, derive_policy
from sandbox.environments.build import SEED_DIR
from sandbox.errors import (
    InvalidRequestError,
    LimitError,
    NotFoundError,
    PayloadTooLargeError,
    QuotaError,
)
from sandbox.policy import LimitOverrides, Policy
from sandbox.policy.limits import MAX_TIME_S, MIN_TIME_S
from sandbox.results import ExecLimits, ExecResult, ExecStatus
from sandbox.telemetry.audit import code_hash

logger = logging.getLogger(__name__)

READABLE_ROOTS = (WORKDIR, "/tmp")
JUDGE_WORK = f"{JUDGE_DIR}/work"
JUDGE_TESTS = f"{JUDGE_DIR}/tests"
JUDGE_LOGS = f"{JUDGE_DIR}/logs"
JUDGE_VERIFIER = f"{JUDGE_LOGS}/verifier"
"""Where tests that report a reward file write it: made fresh, judge-only, per judging."""
COMMAND_FILE = ".command.sh"
JUDGE_ENV = {
    **BASE_ENV,
    "HOME": JUDGE_DIR,
    "TMPDIR": JUDGE_DIR,
    "USER": "judge",
    "LOGNAME": "judge",
    "WORK": JUDGE_WORK,
    "WORKSPACE": JUDGE_WORK,
}
# Whatever an earlier judging left goes first: the copy is made before the tests exist.
JUDGE_CLEAR_COMMAND = f"rm -rf {JUDGE_WORK} {JUDGE_TESTS} {AGENT_BIN} {JUDGE_DIR}/{COMMAND_FILE}"
WORKSPACE_COPY = f"python3 -I {HARNESS_DIR}/workspace_copy.py {WORKDIR} {JUDGE_WORK}"
JUDGE_COPY_COMMAND = f"{JUDGE_CLEAR_COMMAND} && exec {WORKSPACE_COPY}"
PYTEST_ARGV = [
    "python3",
    "-I",
    f"{HARNESS_DIR}/pytest_channel.py",
    "-q",
    "-p",
    "no:cacheprovider",
    JUDGE_TESTS,
]
MAX_SNAPSHOT_BYTES = 64 << 20
REAP_INTERVAL_S = 5.0
LISTING = "%y %s %P\\0"  # find's -printf: kind, size, name; NUL-separated
SNAPSHOT_COMMAND = ["tar", "-cf", "-"]  # then -C <folder> <members>: Session.archive_paths
RESTORE_COMMAND = ["tar", "-xf", "-", "--no-same-permissions"]  # then -C <folder>


class SessionSpec(BaseModel):
    """How to start a session."""

    model_config = ConfigDict(extra="forbid")

    image: Literal["python", "polyglot"] = "python"
    policy: str = "default"
    files: FileMap = Field(default_factory=dict, description="path -> text")
    files_base64: dict[RelativePath, str] = Field(
        default_factory=dict, description="path -> base64"
    )
    setup: str | None = Field(default=None, description="A shell command run once, first.")
    from_snapshot: str | None = Field(default=None, description="Start from this snapshot.")
    environment: str | None = Field(
        default=None,
        description="Run in this built environment (POST /v1/environments); image is then unused.",
    )
    resources: ResourceRequest | None = Field(
        default=None, description="The environment's request, lowered to the policy's bounds."
    )
    root: bool = Field(default=False, description="The environment wants root (gVisor only).")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Variables of every command in the environment (only with environment).",
    )
    priority_class: str | None = Field(
        default=None,
        pattern=CLASS_NAME_PATTERN,
        description="On a fleet, the class the session is asked in: checked as for a run "
        "(422 unknown, 403 above the tenant's max_class), but a session's calls are not "
        "queued by the fleet's scheduler (the session holds its own container). A "
        "single-host service ignores it.",
    )


class Command(BaseModel):
    """One command in a session: an argv list, or a string run by ``bash -c``."""

    model_config = ConfigDict(extra="forbid")

    command: str | list[str] = Field(min_length=1)
    stdin: str = ""
    cwd: str = WORKDIR
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: float | None = Field(
        default=None,
        ge=MIN_TIME_S,
        le=MAX_TIME_S,
        allow_inf_nan=False,
        description="At most the policy's wall.",
    )

    @field_validator("command")
    @classmethod
    def _program_named(cls, command: str | list[str]) -> str | list[str]:
        """An argv list names its program: an empty first element cannot be run."""
        if isinstance(command, list) and not command[0]:
            raise ValueError("the first element of an argv list names the program: give one")
        return command


class SessionInfo(BaseModel):
    id: str
    policy: str
    image: str
    created_at: float
    last_used_at: float
    idle_ttl_s: float
    commands: int
    environment: str | None = None
    workdir: str | None = Field(
        default=None, description="The environment's WORKDIR, writable and filled from its image."
    )
    notes: list[str] = Field(default_factory=list, description="How the request was lowered.")


class DirEntry(BaseModel):
    name: str
    kind: Literal["file", "dir", "link", "other"]
    size: int


@dataclass(eq=False)
class Session:
    """A live session: its lease and bookkeeping."""

    id: str
    tenant: str
    policy: Policy
    image: str
    lease: Lease
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)
    commands: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    base_policy: str = ""
    environment: str | None = None
    resources: ResourceRequest | None = None
    root: bool = False
    env: dict[str, str] = field(default_factory=dict)
    seed: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def archive_paths(self) -> tuple[str, list[str]]:
        """(``tar -C`` folder, members): what a snapshot of this session holds."""
        if self.seed is None or self.seed == WORKDIR:
            return WORKDIR, ["."]
        return "/", [path_arg(WORKDIR.lstrip("/")), path_arg(self.seed.lstrip("/"))]

    def info(self) -> SessionInfo:
        idle = time.monotonic() - self.last_used
        return SessionInfo(
            id=self.id,
            policy=self.base_policy or self.policy.name,
            environment=self.environment,
            workdir=self.seed,
            notes=self.notes,
            image=self.image,
            created_at=self.created,
            last_used_at=time.time() - idle,
            idle_ttl_s=self.policy.pool.session_idle_ttl_s,
            commands=self.commands,
        )


def _readable_path(path: str) -> tuple[str, str]:
    """``(directory, relative path)`` for a path below /workspace or /tmp."""
    if not path.startswith("/"):
        return WORKDIR, check_relative_path(path)
    for root in READABLE_ROOTS:
        if path.startswith(root + "/"):
            return root, check_relative_path(path[len(root) + 1 :])
    raise InvalidRequestError(f"{path!r}: only paths below {' and '.join(READABLE_ROOTS)}")


_KINDS: dict[str, Literal["file", "dir", "link", "other"]] = {"f": "file", "d": "dir", "l": "link"}


class SessionManager:
    """Creates, runs and reaps sessions on the execution service's pool."""

    def __init__(
        self,
        execution: ExecutionService,
        snapshots: SnapshotStore,
        environments: EnvironmentBuilder | None = None,
    ) -> None:
        self.execution = execution
        self.snapshots = snapshots
        self.environments = environments
        self._sessions: dict[str, Session] = {}
        self._opening: Counter[str] = Counter()  # sessions waiting for their sandbox
        self._reaper: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin closing idle sessions in the background."""
        self._reaper = asyncio.create_task(self._reap_loop(), name="session-reaper")

    async def create(self, spec: SessionSpec, *, tenant: str) -> Session:
        """Check a sandbox out, write the files, restore the snapshot, run the set-up."""
        snapshot = (
            self.snapshots.get(spec.from_snapshot, tenant=tenant) if spec.from_snapshot else None
        )
        base = self.execution.policy(snapshot.policy if snapshot else spec.policy)
        origin = snapshot or spec
        notes: list[str] = []
        seed = None
        if origin.env and origin.environment is None:
            raise InvalidRequestError("env is for sessions in a built environment; give one")
        if origin.environment is not None:
            image, policy, notes, seed = await self._environment(origin, base, tenant)
            image_name = image
        else:
            policy = base
            image_name = snapshot.image if snapshot else spec.image
            image = self.execution.resolve_image(image_name)
        files = self.files(spec.files, spec.files_base64)
        self._check_session_quota(tenant)
        self._opening[tenant] += 1
        try:
            lease = await self.execution.pool.checkout(image, policy, tenant)
        finally:
            self._opening[tenant] -= 1
        if policy.user.root:
            # What root did to the container (its runner included) must not outlive it.
            lease.retire("a root session's sandbox is never reset nor reused")
        session = Session(
            secrets.token_urlsafe(18),
            tenant,
            policy,
            image_name,
            lease,
            base_policy=base.name,
            environment=origin.environment,
            resources=origin.resources,
            root=origin.root,
            env=dict(origin.env),
            seed=seed,
            notes=notes,
        )
        self._sessions[session.id] = session
        try:
            if seed is not None:
                await self._seed(session, seed)
            if snapshot is not None:
                archive = await self.snapshots.read(snapshot)
                folder, _ = session.archive_paths
                await self._run(
                    session, [*RESTORE_COMMAND, "-C", folder], stdin=archive, role="sandbox"
                )
            if files:
                await self._run(session, ["true"], files=files)
            if spec.setup:
                result = await self.exec(session.id, Command(command=spec.setup), tenant=tenant)
                if result.status is not ExecStatus.OK:
                    raise InvalidRequestError(
                        f"the set-up command failed ({result.status.value}, exit "
                        f"{result.exit_code}): {result.stderr.decode(errors='replace')[-500:]}"
                    )
        except BaseException:
            await self.close(session.id, tenant=tenant)
            raise
        return session

    async def _environment(
        self, origin: SessionSpec | SnapshotRecord, base: Policy, tenant: str
    ) -> tuple[str, Policy, list[str], str | None]:
        """A built environment's image (one ``tenant`` built), its policy derived from
        ``base`` (with the notes), and its WORKDIR to fill from the image."""
        if self.environments is None:
            raise InvalidRequestError("this service runs no built environments")
        assert origin.environment is not None
        record = await asyncio.to_thread(
            functools.partial(self.environments.use, origin.environment, tenant=tenant)
        )
        policy, notes = await asyncio.to_thread(
            derive_policy,
            base,
            origin.resources,
            environment=origin.environment,
            env=origin.env,
            root=origin.root,
            seed=record.seed,
        )
        return record.image, policy, [*record.notes, *notes], record.seed

    async def _seed(self, session: Session, seed: str) -> None:
        """Copy the image's WORKDIR (kept by the build) onto its writable tmpfs."""
        result = await self._run(
            session,
            ["cp", "-R", "--preserve=mode,timestamps,links", f"{SEED_DIR}/.", path_arg(seed)],
            role="sandbox",
        )
        if result.status is not ExecStatus.OK:
            raise InvalidRequestError(
                f"could not fill {seed} from the environment's image: "
                f"{result.stderr.decode(errors='replace')[-300:]}"
            )

    def _check_session_quota(self, tenant: str) -> None:
        """:class:`QuotaError` if ``tenant`` has its ``max_sessions`` open (its sandboxes
        count against its ``max_concurrency`` in the pool as well)."""
        limit = self.execution.pool.quotas(tenant).max_sessions
        mine = len(self.sessions_of(tenant)) + self._opening[tenant]
        if limit is not None and mine >= limit:
            raise QuotaError(
                f"tenant {tenant!r} already has {mine} sessions open and its max_sessions is "
                f"{limit}; close one (DELETE /v1/sessions/{{id}})",
                retry_after=5,
            )

    def get(self, session_id: str, *, tenant: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None or session.tenant != tenant:
            raise NotFoundError(f"no session {session_id!r}")
        return session

    @property
    def count(self) -> int:
        """How many sessions are open, of every tenant."""
        return len(self._sessions)

    def sessions_of(self, tenant: str) -> list[Session]:
        return [s for s in self._sessions.values() if s.tenant == tenant]

    async def exec(self, session_id: str, command: Command, *, tenant: str) -> ExecResult:
        """Run one command; background processes it starts stay until the session ends."""
        session = self.get(session_id, tenant=tenant)
        given = command.command
        argv = ["bash", "-c", given] if isinstance(given, str) else given
        env = sandbox_env(session.policy, command.env)
        limits = exec_limits(
            session.policy,
            LimitOverrides(wall_time_s=command.timeout_s) if command.timeout_s else None,
        )
        started = time.perf_counter()
        result = await self._run(
            session, argv, stdin=command.stdin.encode(), cwd=command.cwd, env=env, limits=limits
        )
        session.commands += 1
        audit = self.execution.audit
        if audit is not None:
            audit.record(
                tenant=tenant,
                kind="session",
                policy=session.policy.name,
                image=session.image,
                code_sha256=code_hash(" ".join(argv)),
                verdict=result.status.value,
                wall_s=result.usage.wall_s,
                cpu_s=result.usage.cpu_s,
                peak_memory_bytes=result.usage.peak_memory_bytes,
                duration_s=round(time.perf_counter() - started, 6),
                detail=f"session {session.id} command {session.commands}",
            )
        return result

    async def write_files(
        self, session_id: str, files: Mapping[str, bytes], *, tenant: str
    ) -> None:
        """Create or replace files below /workspace (relative paths) as the sandbox user."""
        session = self.get(session_id, tenant=tenant)
        checked = {check_relative_path(path): data for path, data in files.items()}
        await self._run(session, ["true"], files=checked)

    async def read_file(self, session_id: str, path: str, *, tenant: str) -> bytes:
        """A file's bytes; links anywhere on the path are refused."""
        session = self.get(session_id, tenant=tenant)
        directory, relative = _readable_path(path)
        result = await self._run(session, ["true"], cwd=directory, fetch=[relative])
        if relative not in result.files:
            raise NotFoundError(f"{path}: {result.file_errors.get(relative, 'not found')}")
        return result.files[relative]

    async def list_dir(self, session_id: str, path: str, *, tenant: str) -> list[DirEntry]:
        """The entries of a directory as the sandbox user sees them (relative: to /workspace)."""
        session = self.get(session_id, tenant=tenant)
        argv = ["find", path_arg(path), "-mindepth", "1", "-maxdepth", "1", "-printf", LISTING]
        result = await self._run(session, argv)
        if result.status is not ExecStatus.OK:
            raise NotFoundError(f"{path}: {result.stderr.decode(errors='replace').strip()}")
        entries = []
        for record in result.stdout.split(b"\0"):
            if not record:
                continue
            kind, size, name = record.decode(errors="replace").split(" ", 2)
            entries.append(DirEntry(name=name, kind=_KINDS.get(kind, "other"), size=int(size)))
        return sorted(entries, key=lambda entry: entry.name)

    async def run_hidden_tests(
        self,
        session_id: str,
        tests: Mapping[str, bytes],
        *,
        command: str | None = None,
        timeout_s: float,
        tenant: str,
        collect: Sequence[str] = (),
        isolate_agent: bool = True,
        agent_run: bool = False,
    ) -> ExecResult:
        """Judge the session's workspace with tests it has never seen.

        Every process the session left is killed. Then, as the judge uid, with
        nothing else in ``/judge`` yet, the workspace is copied to ``/judge/work``
        (``runner/harness/workspace_copy.py``: exec bits kept, links that do not
        resolve inside the copy dropped; not for an isolated ``command``, which
        never reads the workspace but through ``agent-run``), and only then ``tests`` are written to
        ``/judge/tests``. Without ``command`` the tests are pytest files, run by the
        platform's harness (``runner/harness/pytest_channel.py``), whose per-test
        outcomes come back on the runner's report channel, nonce checked, as
        ``result.channel``; ``command`` is written to ``/judge/.command.sh`` and run with
        ``bash`` (its text on no command line), and only its
        exit status speaks. Either runs in ``/judge/tests`` as the judge uid, with
        the judge's own identity (``USER``, ``HOME``) and ``$WORK``: the copy for
        pytest; for a ``command``, with ``isolate_agent`` (the default) the
        workspace itself, closed to the judge, whose programs run as the sandbox
        uid through ``agent-run`` (:mod:`sandbox.core.agent_code`); without it the
        copy, and ``agent-run`` runs there as the judge.

        ``collect``: file names the tests write to :data:`JUDGE_VERIFIER` (a
        reward file). That directory is removed and made again, mode 0700 and
        owned by the judge, once the session's processes are gone, and the named
        files are read back by the runner itself after the tests' processes are
        killed too (no link followed, regular files only) into ``result.files``;
        what could not be read is in ``result.file_errors``.

        ``agent_run`` (a Harbor-style verifier ``command``, which re-runs the
        agent's programs): the command works on the agent's own workspace (and
        the environment's ``WORKDIR``), not on a copy. Once the agent's processes
        are gone, every link there that leads out of it is removed, as the
        sandbox uid (``workspace_copy.py --prune-links``); the command runs as
        the judge with ``agent-run`` on its ``PATH`` (also ``$AGENT_RUN``), which
        runs its arguments as the sandbox uid (``runner/harness/agent_run.py``:
        Harbor's ``setpriv --reuid=10001`` for a verifier that is not root), and
        ``$WORK`` is ``/workspace``.
        """
        session = self.get(session_id, tenant=tenant)
        if session.policy.user.root and session.commands:
            raise InvalidRequestError(
                "this session's commands ran as root, which could have changed anything in "
                "its container, the runner included: judge a fresh session of its environment "
                "given the work (hand_over; sandbox.evals.judging does)"
            )
        settle = await self._run(session, ["true"], keep_processes=False)
        if settle.reason is not None:
            raise InvalidRequestError(
                f"the session's processes could not be stopped: {settle.reason}"
            )
        limits = exec_limits(session.policy, None)
        verifier = agent_run and command is not None
        isolated = command is not None and isolate_agent and not verifier
        if agent_run:
            roots = [WORKDIR] if session.seed in (None, WORKDIR) else [WORKDIR, session.seed]
            for root in roots:
                await self._run(
                    session,
                    ["python3", "-I", f"{HARNESS_DIR}/workspace_copy.py", "--prune-links", root],
                    limits=limits,
                    keep_processes=False,
                    role="sandbox",
                )
        await self._run(
            session,
            [
                "bash",
                "-c",
                # The judge's copy is for pytest and the opt-out; an isolated command
                # reaches the workspace itself, through agent-run only.
                JUDGE_CLEAR_COMMAND if agent_run or isolated else JUDGE_COPY_COMMAND,
            ],
            cwd=JUDGE_DIR,
            env=JUDGE_ENV,
            limits=limits,
            role="judge",
            keep_processes=False,
        )
        if collect:
            await self._run(
                session,
                ["bash", "-c", f"rm -rf {JUDGE_LOGS} && mkdir -m 0700 -p {JUDGE_VERIFIER}"],
                cwd=JUDGE_DIR,
                env=JUDGE_ENV,
                limits=limits,
                role="judge",
                keep_processes=False,
            )
        if command is None:
            prepare = ["true"]
        elif verifier:
            prepare = ["bash", "-c", VERIFIER_BIN_COMMAND]
        else:
            prepare = ["bash", "-c", bin_command(isolated=isolated)]
        files = {f"tests/{path}": data for path, data in tests.items()}
        if command is not None:  # run from a file: its text is on no process's command line
            files[COMMAND_FILE] = command.encode()
        await self._run(
            session,
            prepare,
            cwd=JUDGE_DIR,
            env=JUDGE_ENV,
            files=files,
            limits=limits,
            role="judge",
        )
        test_limits = limits.model_copy(update={"wall_s": timeout_s, "cpu_s": timeout_s})
        if command is None:
            argv, env, peer = PYTEST_ARGV, JUDGE_ENV, None
        else:
            argv = ["bash", f"{JUDGE_DIR}/{COMMAND_FILE}"]
            env = {**JUDGE_ENV, "PATH": f"{AGENT_BIN}:{JUDGE_ENV['PATH']}", "AGENT_RUN": AGENT_RUN}
            peer = None
            if verifier:
                env = {**env, "WORK": WORKDIR, "WORKSPACE": WORKDIR}
                peer = verifier_peer(sandbox_env(session.policy, {}))
            elif isolated:
                env = {**env, "WORK": WORKDIR, "WORKSPACE": WORKDIR}
                peer = agent_peer(sandbox_env(session.policy, {}), timeout_s)
                await self._run(
                    session, ["chmod", "0700", WORKDIR], keep_processes=False, role="sandbox"
                )
        try:
            result = await self._run(
                session,
                argv,
                cwd=JUDGE_TESTS,
                env=env,
                limits=test_limits,
                # Root tests (a fresh root session: see the refusal above) run as root.
                role="root" if session.policy.user.root else "judge",
                keep_processes=False,
                channel=command is None,
                peer=peer,
            )
        finally:
            if isolated:
                await self._run(
                    session, ["chmod", "0755", WORKDIR], keep_processes=False, role="sandbox"
                )
        if not collect:
            return result
        # The tests' processes are gone (keep_processes=False): nothing rewrites the files now.
        prefix = JUDGE_VERIFIER.removeprefix(f"{JUDGE_DIR}/") + "/"
        wanted = {prefix + check_relative_path(name): name for name in collect}
        read = await self._run(
            session, ["true"], cwd=JUDGE_DIR, env=JUDGE_ENV, role="judge", fetch=list(wanted)
        )
        return result.model_copy(
            update={
                "files": {wanted[p]: data for p, data in read.files.items()},
                "file_errors": {wanted[p]: why for p, why in read.file_errors.items()},
            }
        )

    async def hand_over(
        self, source_id: str, target_id: str, paths: Sequence[str], *, tenant: str
    ) -> None:
        """Copy ``paths`` of one session into another, as Harbor gives a separate verifier
        the agent's artifacts.

        Every process of the source is killed first. Each path is ``/workspace`` or the
        session's environment ``WORKDIR`` in both sessions; the target's is emptied, then
        filled from a tar the sandbox user makes in the source and unpacks in the target
        (as a snapshot is: the host extracts nothing, links stay links). Judging prunes
        the links that lead out. :class:`PayloadTooLargeError` when the tar would pass
        :data:`MAX_SNAPSHOT_BYTES` (the target is left as it was).
        """
        source = self.get(source_id, tenant=tenant)
        target = self.get(target_id, tenant=tenant)
        for session in (source, target):
            roots = {WORKDIR, session.seed or WORKDIR}
            outside = [path for path in paths if path not in roots]
            if outside:
                raise InvalidRequestError(
                    f"{', '.join(outside)}: only {' and '.join(sorted(roots))} can be handed "
                    "over (the places the sandbox user writes)"
                )
        settle = await self._run(source, ["true"], keep_processes=False)
        if settle.reason is not None:
            raise InvalidRequestError(
                f"the session's processes could not be stopped: {settle.reason}"
            )
        if not paths:
            return
        members = [path_arg(path.lstrip("/")) for path in paths]
        archive = await self._archive(
            source, "/", members, ", ".join(paths), too_large=PayloadTooLargeError
        )
        steps = [(["find", path_arg(path), "-mindepth", "1", "-delete"], b"") for path in paths]
        for argv, stdin in (*steps, ([*RESTORE_COMMAND, "-C", "/"], archive)):
            # As the sandbox uid even in a root verifier: what the archive holds (a root
            # source made it as it pleased) can land in the work directories only.
            done = await self._run(target, argv, stdin=stdin, keep_processes=False, role="sandbox")
            if done.status is not ExecStatus.OK:
                raise InvalidRequestError(
                    f"could not hand {', '.join(paths)} over ({argv[0]}): "
                    f"{done.stderr.decode(errors='replace')[-300:]}"
                )

    async def snapshot(self, session_id: str, *, tenant: str) -> str:
        """The workspace as an archive kept in the snapshot store; returns the snapshot's id."""
        session = self.get(session_id, tenant=tenant)
        folder, members = session.archive_paths
        archive = await self._archive(session, folder, members, "the workspace")
        return await self.snapshots.add(
            archive,
            tenant=tenant,
            policy=session.base_policy or session.policy.name,
            image=session.image,
            environment=session.environment,
            resources=session.resources,
            root=session.root,
            env=session.env,
        )

    async def _archive(
        self,
        session: Session,
        folder: str,
        members: list[str],
        what: str,
        too_large: type[InvalidRequestError] = InvalidRequestError,
    ) -> bytes:
        """A tar of ``members`` of ``folder``, made in the sandbox by the session's user
        (whatever a root session pleases: it is unpacked as the sandbox uid);
        ``too_large`` is raised past :data:`MAX_SNAPSHOT_BYTES`."""
        limits = exec_limits(session.policy, None).model_copy(
            update={"stdout_bytes": MAX_SNAPSHOT_BYTES}
        )
        result = await self._run(
            session, [*SNAPSHOT_COMMAND, "-C", folder, *members], limits=limits
        )
        if result.status is not ExecStatus.OK or result.stdout_truncated:
            error = too_large if result.stdout_truncated else InvalidRequestError
            raise error(
                f"could not archive {what} ({result.status.value}; at most "
                f"{MAX_SNAPSHOT_BYTES} bytes): {result.stderr.decode(errors='replace')[-300:]}"
            )
        return result.stdout

    async def close(self, session_id: str, *, tenant: str) -> None:
        """End the session: its processes are killed and its sandbox reset; idempotent."""
        session = self._sessions.get(session_id)
        if session is None or session.tenant != tenant:
            return
        del self._sessions[session_id]
        async with session.lock:
            self.execution.pool.checkin(session.lease)

    async def close_all(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for session in list(self._sessions.values()):
            await self.close(session.id, tenant=session.tenant)

    files = staticmethod(decode_files)

    async def _run(
        self,
        session: Session,
        argv: list[str],
        *,
        stdin: bytes = b"",
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes] | None = None,
        fetch: list[str] | None = None,
        limits: ExecLimits | None = None,
        role: str | None = None,
        keep_processes: bool = True,
        channel: bool = False,
        peer: Mapping[str, Any] | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the session's sandbox; ``role`` None: the session's own user
        (root in a root session, else the sandbox uid)."""
        role = role or ("root" if session.policy.user.root else "sandbox")
        async with session.lock:
            if session.id not in self._sessions:
                raise NotFoundError(f"session {session.id!r} has ended")
            session.last_used = time.monotonic()
            try:
                result = await session.lease.sandbox.exec(
                    argv,
                    limits=limits or exec_limits(session.policy, None),
                    stdin=stdin,
                    cwd=cwd,
                    env=env or {**BASE_ENV, **session.policy.env.set},
                    files=files,
                    fetch=fetch or (),
                    keep_processes=keep_processes,
                    role=role,
                    channel=channel,
                    peer=peer,
                )
            except (InvalidRequestError, LimitError, NotFoundError):
                raise  # the runner answered (no such command, say): the session goes on
            except Exception as exc:
                session.lease.retire(f"session command failed: {exc}")
                self._sessions.pop(session.id, None)
                self.execution.pool.checkin(session.lease)
                raise
            session.last_used = time.monotonic()
            return result

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(REAP_INTERVAL_S)
            self.snapshots.expire()
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if now - session.last_used > session.policy.pool.session_idle_ttl_s:
                    logger.info("closing idle session %s of %s", session.id, session.tenant)
                    await self.close(session.id, tenant=session.tenant)
