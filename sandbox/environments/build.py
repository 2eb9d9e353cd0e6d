"""Build a task's environment with the real engine, tagged by the hash of its inputs.

The task's Dockerfile is built as written except for its ``FROM`` lines, which
go through the operator's aliases (:mod:`.config`); an image neither aliased
nor present in the local engine is refused before anything is built (nothing
is ever pulled). A last stage is appended that layers our runner in
(``layer.sh``: python3 from the image's own apt archive when it lacks one,
the sandbox and judge users, ``/workspace``, ``/judge``, the runner's sources,
copied from a ``sandbox-layer:<digest>`` image so that they are never part of the
task's build context) and clears ``ENTRYPOINT``, so every task image runs the same
hardened runner as the built-in images, whatever its ``FROM``.

The tag is ``sandbox-env:<id>``; the id is 12 hex digits of a SHA-256 over the
rewritten Dockerfile, the resolved base images' ids, the build args, the
context's files (less the spec's ``exclude``, which is not built either), the
runner's sources and ``layer.sh``: an unchanged
environment is found, not rebuilt. Every step runs with no network (unless the
operator sets ``build_network``) and the operator's ``build_memory_mb`` (no swap);
a build runs at most ``build_timeout_s`` (then its connection to the engine is
cut, which stops the step: see
:mod:`.engine_build`); each step is a progress line, and the whole output is
kept in the store (``<id>.log``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound
from pydantic import BaseModel, ValidationError

from sandbox.errors import (
    EngineError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    QuotaError,
    SandboxTimeoutError,
)
from sandbox.host import images
from sandbox.host.engine import docker_client
from sandbox.host.locks import exclusive, exclusive_now, shared
from sandbox.policy import AllowRule, ExtraTmpfs
from sandbox.policy.limits import MIN_TMPFS_INODES, WORKSPACE_PATH

from .build_cgroup import build_cgroup, pids_root, require_gvisor_steps
from .config import CONFIG_ENV, EnvironmentsConfig, check_reference, normalise_reference
from .dockerfile import Rewritten, rewrite_from_lines
from .engine_build import BuildExpired, run_build
from .gc import BUILDS_LOCK, collect, remove_leftovers
from .spec import EnvironmentSpec
from .store import ENV_REPOSITORY, LABEL_ENVIRONMENT, EnvironmentRecord, RecordStore

Progress = Callable[[str], None]
BuildNetworks = Callable[
    [Sequence[AllowRule]], contextlib.AbstractContextManager[tuple[str, Mapping[str, str]]]
]

#: Bump when the way environments are assembled changes (it is part of every id).
BUILD_FORMAT = "2"
MAX_CONTEXT_FILES = 20000
LOG_TAIL_LINES = 30
#: The Dockerfile built (the task's with the layer stage), a name a context may not hold.
LAYER_DOCKERFILE = ".sandbox-layer.Dockerfile"
LAYER_REPOSITORY = "sandbox-layer"
_ANSWER = {"environment", "image", "build_seconds", "notes", "log_tail"}
LAYER_SCRIPT = Path(__file__).with_name("layer.sh")
SEED_DIR = "/opt/sandbox-seed"  # where layer.sh keeps the image's WORKDIR
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
QUOTA_RETRY_AFTER_S = 60
CPU_PERIOD_US = 100_000
# What a shell or libc says when fork fails for the process limit (EAGAIN).
_FORK_FAILED = "Resource temporarily unavailable"


class EnvironmentBuilt(BaseModel):
    """The body of ``POST /v1/environments``."""

    environment: str
    image: str
    cached: bool
    build_seconds: float
    notes: list[str]
    log_tail: str


@dataclass(frozen=True)
class BuildResult:
    """A built (or found) environment."""

    record: EnvironmentRecord
    cached: bool

    def answer(self) -> EnvironmentBuilt:
        """The body of ``POST /v1/environments``."""
        return EnvironmentBuilt(cached=self.cached, **self.record.model_dump(include=_ANSWER))


def _our_image(name: str) -> str | None:
    """``sandbox-base`` / ``sandbox-<name>`` (no tag, or the current one): the tag of the
    current sources."""
    repository, _, tag = name.partition(":")
    current: str | None = None
    if repository == images.BASE_REPOSITORY:
        current = images.base_tag()
    elif repository.startswith("sandbox-") and repository[8:] in images.image_names():
        current = images.resolve_image(repository[8:])
    if current is None or (tag and name != current):
        return None
    return current


class EnvironmentBuilder:
    """Builds environments into the local engine and keeps their records in ``directory``.

    ``build_networks`` gives a build its network when the config says ``build_network:
    allowlist``: called with ``build_allow``, it is a context manager yielding the
    network's name and the proxy variables for the steps (the service sets it to its
    backend's :meth:`~sandbox.backends.network.AllowlistNetworks.build_network`).
    ``max_environments`` answers how many environments a tenant may use (None: any)."""

    def __init__(
        self,
        directory: Path,
        config: EnvironmentsConfig | None = None,
        *,
        build_networks: BuildNetworks | None = None,
        max_environments: Callable[[str], int | None] = lambda _tenant: None,
    ) -> None:
        self.config = config or EnvironmentsConfig()
        self.records = RecordStore(directory)
        self.build_networks = build_networks
        self.max_environments = max_environments

    # ----------------------------------------------------------------- lookups

    def get(self, environment: str, *, tenant: str) -> EnvironmentRecord:
        """The record of an environment ``tenant`` built (:class:`NotFoundError` if none)."""
        return self.records.get(environment, tenant=tenant)

    def use(self, environment: str, *, tenant: str) -> EnvironmentRecord:
        """The record of ``environment``, marked used; refused if its image was collected,
        and answered as unknown to a tenant that did not build it."""
        record = self.records.get(environment, tenant=tenant)
        with _client() as client:
            if not _image_id(client, record.image):
                self.records.remove(environment)
                raise NotFoundError(
                    f"environment {environment!r} was garbage-collected (its image "
                    f"{record.image} is gone); build it again"
                )
        return self.records.touch(environment)

    def resolve_base(
        self, client: docker.DockerClient, image: str, notes: list[str], *, tenant: str
    ) -> str:
        """The local image to build ``FROM image`` (or ``COPY --from=image``) on, or the
        refusal naming it and the fix: an alias of the environments config, one of our
        images, or an environment ``tenant`` built; no other image on this host."""
        try:
            check_reference(image)
        except ValueError as exc:
            raise InvalidRequestError(f"FROM {image}: {exc}") from None
        target = self.config.alias(image)
        if target is not None:
            resolved = _our_image(target) or target
            if not _image_id(client, resolved):
                raise InvalidRequestError(
                    f"FROM {image}: its alias {target!r} ({resolved}) is not built on this "
                    "host; run `sandbox images build` (or load that image)"
                )
            notes.append(f"FROM {image} is built from {resolved} (image_aliases)")
            return resolved
        ours = _our_image(image)
        if ours is not None:
            return ours
        repository, _, environment = image.partition(":")
        mine = repository == ENV_REPOSITORY and self._built_by(environment, tenant)
        if mine and _image_id(client, image):
            return image
        key = normalise_reference(image)
        raise InvalidRequestError(
            f"FROM {image}: a build may start from an alias of the environments config, one "
            "of the platform's images (sandbox-base, sandbox-python, ...) or an environment "
            "this tenant built (sandbox-env:<id>); an image is never pulled. Add an alias "
            f"to the environments config (${CONFIG_ENV}), e.g. "
            f'image_aliases: {{"{key}": sandbox-base}} (for an image of your own, `docker load` '
            "it on this host, then alias it)"
        )

    # ----------------------------------------------------------------- building

    def build(
        self, spec: EnvironmentSpec, *, tenant: str, progress: Progress | None = None
    ) -> BuildResult:
        """Build ``spec`` for ``tenant`` (or find it built, and let ``tenant`` use it); GC
        runs after a new build."""
        say = progress or (lambda line: None)
        with tempfile.TemporaryDirectory(prefix="sandbox-env-") as tmp, _client() as client:
            work = Path(tmp)
            notes: list[str] = []
            source, dockerfile_text, context = _inputs(spec, work)
            rewritten = rewrite_from_lines(
                dockerfile_text,
                resolve=lambda image: self.resolve_base(client, image, notes, tenant=tenant),
                build_args=spec.build_args,
                source=source,
            )
            bases = [resolved for _, resolved in rewritten.bases]
            base_ids = [_image_id(client, ref) or "" for ref in bases]
            files = _context_files(context, self.config.max_context_mb << 20, spec.exclude)
            parts = [
                "environment",
                BUILD_FORMAT,
                rewritten.text,
                *(f"base {ref} {ident}" for ref, ident in zip(bases, base_ids, strict=True)),
                *(f"arg {k}={v}" for k, v in sorted(spec.build_args.items())),
                *(f"link {rel} {os.readlink(p)}" for rel, p in _links(context, spec.exclude)),
            ]
            trees = [
                ("context", files),
                ("runner", images._runner_files()),
                ("layer", [("layer.sh", LAYER_SCRIPT)]),
            ]
            environment = images._digest(parts, trees)
            with self._lock(environment, say):
                if tenant not in self.records.tenants(environment):
                    self._check_room(tenant)
                found = self._found(client, environment)
                if found is not None:
                    self.records.grant(environment, tenant)
                    say(f"environment {environment} is built ({found.image}); not rebuilt")
                    return BuildResult(found, cached=True)
                # What the hash skipped (bytecode caches, exclude) is not built either.
                shutil.copytree(
                    context, work / "build", symlinks=True, ignore=_skipped(context, spec.exclude)
                )
                try:
                    with shared(BUILDS_LOCK):
                        record = self._build(
                            client, environment, work / "build", rewritten, spec, notes, say
                        )
                finally:
                    _remove_leftovers_if_alone(self.config.image_aliases.values(), say)
                self.records.grant(environment, tenant)
        budget = self.config.disk_budget_mb << 20
        for removed in collect(self.records, budget, keep={environment}):
            say(f"garbage-collected environment {removed} (disk budget {budget >> 20} MB)")
        return BuildResult(record, cached=False)

    def _check_room(self, tenant: str) -> None:
        """Refuse ``tenant`` one more environment past its ``max_environments``."""
        limit = self.max_environments(tenant)
        if limit is None:
            return
        held = self.records.granted_to(tenant)
        if len(held) >= limit:
            raise QuotaError(
                f"tenant {tenant!r} holds {len(held)} task environments and its "
                f"max_environments is {limit}; delete one it no longer needs "
                "(DELETE /v1/environments/<id>)",
                retry_after=QUOTA_RETRY_AFTER_S,
            )

    def delete(self, environment: str, *, tenant: str) -> None:
        """Take ``tenant``'s use of ``environment`` away (unknown to it: not found); the last
        tenant's delete removes the image too (unless a session still runs in it: the
        disk budget's collection removes it later)."""
        self.records.get(environment, tenant=tenant)
        with self._lock(environment, lambda line: None):
            if self.records.revoke(environment, tenant):
                return
            record = self.records.get(environment)
            with _client() as client:
                try:
                    client.images.remove(record.image)
                except ImageNotFound:
                    pass
                except APIError:  # a session's container still uses it
                    return
            self.records.remove(environment)

    def _built_by(self, environment: str, tenant: str) -> bool:
        try:
            return tenant in self.records.tenants(environment)
        except NotFoundError:  # not an id at all
            return False

    def _found(self, client: docker.DockerClient, environment: str) -> EnvironmentRecord | None:
        try:
            record = self.records.get(environment)
        except NotFoundError:
            return None
        if not _image_id(client, record.image):
            return None
        return self.records.touch(environment)

    def _lock(self, environment: str, say: Progress) -> contextlib.AbstractContextManager[None]:
        """One build of an environment at a time on this host (others wait, then find it)."""
        return exclusive(
            self.records.lock_path(environment),
            lambda: say(f"environment {environment} is being built by another request; waiting"),
        )

    def _build(
        self,
        client: docker.DockerClient,
        environment: str,
        build_context: Path,
        rewritten: Rewritten,
        spec: EnvironmentSpec,
        notes: list[str],
        say: Progress,
    ) -> EnvironmentRecord:
        """Build the copy of the context in ``build_context`` with the runner layer added."""
        tag = f"{ENV_REPOSITORY}:{environment}"
        bases = [resolved for _, resolved in rewritten.bases]
        dockerfile = build_context / LAYER_DOCKERFILE
        ignore = build_context / ".dockerignore"
        if dockerfile.exists() or dockerfile.is_symlink():
            raise InvalidRequestError(
                f"the build context holds {LAYER_DOCKERFILE}, a name the platform uses; rename it"
            )
        if ignore.is_symlink():
            raise InvalidRequestError("the build context's .dockerignore is a link; make it a file")
        layer_image = _layer_image(client)
        dockerfile.write_text(rewritten.text + _layer_stage(rewritten.final_stage, layer_image))
        # The engine reads the Dockerfile and hides it (and a .dockerignore the task did
        # not have) from COPY, since the .dockerignore names them.
        hidden = [LAYER_DOCKERFILE] if ignore.exists() else [LAYER_DOCKERFILE, ".dockerignore"]
        with ignore.open("a") as handle:
            handle.write("\n" + "\n".join(hidden) + "\n")
        log_path = self.records.log_path(environment)
        say(f"building environment {environment} ({tag}) from {', '.join(bases)}")
        started = time.monotonic()
        with log_path.open("w") as log:
            tail = _stream_build(
                client,
                build_context,
                tag,
                environment,
                spec,
                self.config,
                self.build_networks,
                log,
                say,
            )
        build_seconds = round(time.monotonic() - started, 2)
        ident = _image_id(client, tag)
        if not ident:
            raise EngineError(f"the build of {tag} ended without an image; see {log_path}")
        image = client.images.get(tag)
        config = image.attrs.get("Config") or {}
        _check_config(client, tag, config, notes)
        workdir = config.get("WorkingDir") or "/"
        base_size = max((_size(client, ref) for ref in bases), default=0)
        now = time.time()
        record = EnvironmentRecord(
            environment=environment,
            image=tag,
            bases=bases,
            workdir=workdir,
            seed=_seed_target(workdir, notes),
            size_bytes=max(0, int(image.attrs.get("Size", 0)) - base_size),
            build_seconds=build_seconds,
            created_at=now,
            last_used_at=now,
            notes=notes,
            log_tail="".join(tail),
        )
        self.records.put(record)
        say(f"built environment {environment} in {build_seconds:.1f} s")
        return record


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _client() -> Iterator[docker.DockerClient]:
    client = docker_client(timeout=images.BUILD_HTTP_TIMEOUT_S)
    try:
        yield client
    finally:
        client.close()


def _image_id(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return str(client.images.get(ref).id)
    except ImageNotFound:
        return None
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot inspect image {ref}: {exc}") from exc


def _size(client: docker.DockerClient, ref: str) -> int:
    """An image's size; 0 when it is gone (a base removed once the build had it)."""
    try:
        return int(client.images.get(ref).attrs.get("Size", 0))
    except ImageNotFound:
        return 0
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot inspect image {ref}: {exc}") from exc


def _excluded(rel: str, exclude: Collection[str]) -> bool:
    return rel.split("/", 1)[0] in exclude


def _skipped(context: Path, exclude: Collection[str]) -> Callable[[str, list[str]], list[str]]:
    """``copytree``'s ignore: bytecode caches, and ``exclude`` at the context's top level."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == context
        return [
            n
            for n in names
            if n == "__pycache__" or n.endswith((".pyc", ".pyo")) or (top and n in exclude)
        ]

    return ignore


def _inputs(spec: EnvironmentSpec, work: Path) -> tuple[str, str, Path]:
    """(where the Dockerfile is from, its text, the build context folder)."""
    if (spec.dockerfile is None) == (spec.image is None):
        raise InvalidRequestError("an environment names exactly one of dockerfile or image")
    if spec.image is not None:
        try:
            check_reference(spec.image)
        except ValueError as exc:
            raise InvalidRequestError(f"image: {exc}") from None
        context = work / "context"
        context.mkdir()
        return f"image {spec.image}", f"FROM {spec.image}\n", context
    assert spec.dockerfile is not None
    dockerfile = spec.dockerfile
    context = spec.context or dockerfile.parent
    try:
        text = dockerfile.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"{dockerfile}: cannot read the Dockerfile: {exc}") from None
    if not context.is_dir():
        raise InvalidRequestError(f"{context}: the build context is not a folder")
    return str(dockerfile), text, context


def _context_files(
    context: Path, max_bytes: int, exclude: Collection[str]
) -> list[tuple[str, Path]]:
    """The context's regular files (sorted) but ``exclude``, refused past the size limits."""
    files = [(rel, path) for rel, path in images._files(context) if not _excluded(rel, exclude)]
    total = sum(path.stat().st_size for _, path in files)
    if total > max_bytes or len(files) > MAX_CONTEXT_FILES:
        raise PayloadTooLargeError(
            f"the build context {context} holds {len(files)} files, {total} bytes; at most "
            f"{MAX_CONTEXT_FILES} files and {max_bytes >> 20} MB are built (max_context_mb)"
        )
    return files


def _links(context: Path, exclude: Collection[str]) -> list[tuple[str, Path]]:
    return sorted(
        (rel, p)
        for p in context.rglob("*")
        if p.is_symlink() and not _excluded(rel := p.relative_to(context).as_posix(), exclude)
    )


def _check_config(
    client: docker.DockerClient, tag: str, config: dict[str, Any], notes: list[str]
) -> None:
    """Refuse (and remove) an image whose metadata would act at run time; note what is
    ignored. A ``VOLUME`` would be a writable host directory without a size limit in every
    sandbox, ``ONBUILD`` would run instructions in another build. A ``HEALTHCHECK`` never
    runs (sandboxes start with none), nor does ``STOPSIGNAL`` matter (they are killed), and
    ``SHELL`` only changed the build's own ``RUN`` steps."""
    refused = []
    if config.get("Volumes"):
        paths = ", ".join(sorted(config["Volumes"]))
        refused.append(
            f"VOLUME {paths}: a sandbox writes only to its tmpfs workspaces; remove it "
            "(a task's data goes in the image, or in /workspace at run time)"
        )
    if config.get("OnBuild"):
        refused.append("ONBUILD (from a base image): its instructions would run in other builds")
    if refused:
        _discard(client, tag)
        raise InvalidRequestError("the image is refused: " + "; ".join(refused))
    if config.get("Healthcheck"):
        notes.append("the image's HEALTHCHECK is ignored: sandboxes run no health check")


def _seed_target(workdir: str, notes: list[str]) -> str | None:
    """Where a session copies the image's WORKDIR back (``layer.sh`` kept it), or None.

    /workspace is a tmpfs already; another directory gets a tmpfs of its own if a
    policy could mount one there (never over the platform's or the kernel's paths).
    """
    if workdir in ("/", WORKSPACE_PATH):
        return None if workdir == "/" else workdir
    try:
        ExtraTmpfs(path=workdir, size_mb=1, inodes=MIN_TMPFS_INODES)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        notes.append(f"WORKDIR {workdir} stays read-only at run time: {reason}")
        return None
    return workdir


def _layer_stage(final_stage: str, layer_image: str) -> str:
    return (
        "\n# --- appended by the sandbox platform: the runner layer ---\n"
        f"FROM {final_stage}\n"
        "USER root\n"
        # Replaced whole: nothing the image left under the runner's directory survives.
        'RUN ["/bin/sh", "-c", "rm -rf /opt/sandbox"]\n'
        f"COPY --from={layer_image} / /opt/sandbox/\n"
        'RUN ["/bin/sh", "/opt/sandbox/layer.sh"]\n'
        "ENTRYPOINT []\n"
        'CMD ["/bin/sh"]\n'
    )


def _layer_files() -> list[tuple[str, Path]]:
    """What the layer stage copies into ``/opt/sandbox``: the runner's sources, ``layer.sh``."""
    runner = [(f"runner/{rel}", path) for rel, path in images._runner_files()]
    return [*runner, ("layer.sh", LAYER_SCRIPT)]


def _layer_image(client: docker.DockerClient) -> str:
    """``sandbox-layer:<digest>``, an image of :func:`_layer_files` alone (imported once per
    content, no build step), which the layer stage copies from."""
    files = _layer_files()
    tag = images._digest(["layer"], [("layer", files)])[:12]
    name = f"{LAYER_REPOSITORY}:{tag}"
    if _image_id(client, name):
        return name
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in sorted({str(Path(rel).parent) for rel, _ in files} - {"."}):
            entry = tarfile.TarInfo(directory)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(entry)
        for rel, path in files:
            data = path.read_bytes()
            entry = tarfile.TarInfo(rel)
            entry.size, entry.mode = len(data), 0o644
            tar.addfile(entry, io.BytesIO(data))
    try:
        client.api.import_image_from_data(buffer.getvalue(), repository=LAYER_REPOSITORY, tag=tag)
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot import the runner layer's image {name}: {exc}") from exc
    return name


def _remove_leftovers_if_alone(bases: Collection[str], say: Progress) -> None:
    """What builds left untagged, removed unless another build on this machine runs (the
    one that ends last removes them)."""
    with exclusive_now(BUILDS_LOCK) as alone:
        if alone:
            with contextlib.suppress(EngineError):
                removed = remove_leftovers(frozenset(normalise_reference(b) for b in bases))
                if removed:
                    say(f"removed {removed} untagged images builds left")


def _discard(client: docker.DockerClient, tag: str) -> None:
    """Remove the image ``tag`` if it is there."""
    with contextlib.suppress(ImageNotFound, APIError):
        client.images.remove(tag, force=True)


def _stream_build(
    client: docker.DockerClient,
    context: Path,
    tag: str,
    environment: str,
    spec: EnvironmentSpec,
    config: EnvironmentsConfig,
    networks: BuildNetworks | None,
    log: IO[str],
    say: Progress,
) -> deque[str]:
    """Run the build, logging it; stop it past ``spec.build_timeout_s`` (see
    :mod:`.engine_build`). Every step runs on the operator's ``build_network`` (default
    none; allowlist: a network of the build's own from ``networks``) with
    ``build_memory_mb`` of memory and no swap and ``build_cpus`` CPUs, and the build's
    steps together with at most ``build_pids`` processes, under gVisor unless
    ``build_runtime`` is ``engine`` (:mod:`.build_cgroup`)."""
    memory_mb = config.build_memory_mb
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    arguments: dict[str, Any] = {
        "path": str(context),
        "dockerfile": LAYER_DOCKERFILE,
        "tag": tag,
        "buildargs": dict(spec.build_args),
        "labels": {LABEL_ENVIRONMENT: environment},
        "rm": True,
        "forcerm": True,
        "pull": False,
        "network_mode": config.build_network,
        "container_limits": {
            "memory": memory_mb << 20,
            "memswap": memory_mb << 20,
            "cpuperiod": CPU_PERIOD_US,
            "cpuquota": round(config.build_cpus * CPU_PERIOD_US),
        },
    }
    with contextlib.ExitStack() as stack:
        if config.build_network == "allowlist":
            if networks is None:
                raise EngineError(
                    "build_network: allowlist needs the service's egress proxy, which this "
                    "builder was not given (build through the service, or set build_network: "
                    "none)"
                )
            name, proxy_env = stack.enter_context(networks(config.build_allow))
            arguments["network_mode"] = name
            arguments["buildargs"] = {**spec.build_args, **proxy_env}
        gvisor = config.build_runtime == "gvisor"
        if config.build_pids or gvisor:
            info = client.info()
            if gvisor:
                require_gvisor_steps(info)
            if gvisor and config.build_pids:  # gVisor's kernel counts the step's own
                arguments["container_limits"]["ulimits"] = json.dumps(
                    [{"Name": "nproc", "Soft": config.build_pids, "Hard": config.build_pids}]
                )
            arguments["container_limits"]["cgroupparent"] = stack.enter_context(
                build_cgroup(pids_root(info), config.build_pids, gvisor=gvisor)
            )
        try:
            error = _run_steps(arguments, spec.build_timeout_s, environment, tail, log, say)
        except BuildExpired:
            _discard(client, tag)  # a build that ended past its limit is not kept
            raise SandboxTimeoutError(
                f"the build of environment {environment} took longer than build_timeout_s="
                f"{spec.build_timeout_s:g} s and was stopped; raise build_timeout_s (at most "
                "7200) or make the build faster\n" + "".join(tail)
            ) from None
    if error is not None:
        layer = [line for line in tail if line.startswith("sandbox-layer:")]
        if layer:
            raise InvalidRequestError(
                "the task image cannot take the sandbox runner: " + layer[-1].strip()
            )
        if "non-zero code: 137" in error:
            error += (
                f" (137: the step was killed, most often for passing the build memory limit, "
                f"build_memory_mb={memory_mb}, which the operator sets)"
            )
        elif config.build_pids and any(_FORK_FAILED in line for line in tail):
            error += (
                f" (a process could not be started: the build's steps may have at most "
                f"build_pids={config.build_pids} processes and threads at once, which the "
                "operator sets)"
            )
        raise InvalidRequestError(
            f"building environment {environment} failed: {error.strip()}\n" + "".join(tail)
        )
    return tail


def _run_steps(
    arguments: dict[str, Any],
    timeout_s: float,
    environment: str,
    tail: deque[str],
    log: IO[str],
    say: Progress,
) -> str | None:
    """Stream the build into ``log`` and ``tail``; the engine's error, or None."""
    error: str | None = None
    for chunk in run_build(arguments, timeout_s):
        if "error" in chunk:
            error = (chunk.get("errorDetail") or {}).get("message") or str(chunk["error"])
            log.write(f"ERROR: {error}\n")
            continue
        for line in str(chunk.get("stream") or "").splitlines():
            line = _ANSI.sub("", line)
            log.write(line + "\n")
            if not line.strip():
                continue
            tail.append(line + "\n")
            if line.startswith("Step "):
                say(f"{environment}: {' '.join(line.split())[:110]}")
    return error
