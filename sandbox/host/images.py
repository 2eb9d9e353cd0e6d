"""Build the sandbox images locally, tagged by the hash of what went into them.

No registry is needed. The base image is Debian bookworm made with
``debootstrap --variant=minbase`` into a folder under
:func:`cache_dir`, then ``docker import``-ed as ``sandbox-base:<hash>``. Each
directory of ``images/`` holding a ``Dockerfile`` (except ``base``) is one
sandbox image, built ``FROM`` that base (or ``debian:bookworm-slim`` with
``base="registry"``) with a copy of ``sandbox/runner`` added to its context as
``runner/``.

A tag is ``sandbox-<name>:<12 hex>``: the first 12 hex digits of a SHA-256
over the image's files, the runner's sources, the base and
:data:`BUILD_FORMAT`. There is no ``latest``: :func:`resolve_image` computes the
tag from the current sources, so a stale image is never used, and
:func:`build_images` skips an image whose tag already exists.

Adding an image is adding a directory ``images/<name>/`` with a Dockerfile
that starts with ``ARG BASE_IMAGE`` / ``FROM ${BASE_IMAGE}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import docker
import requests
from docker.errors import DockerException, ImageNotFound

from sandbox.errors import EngineError, InfrastructureError, InvalidRequestError, NotFoundError
from sandbox.host.engine import docker_client, install_missing_packages
from sandbox.host.locks import exclusive

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]
BaseKind = Literal["debootstrap", "registry"]

#: Bump when the way images are assembled changes (it is part of every hash).
BUILD_FORMAT = "1"
HASH_HEX_DIGITS = 12
BASE_KINDS: tuple[BaseKind, ...] = ("debootstrap", "registry")

BASE_NAME = "base"
BASE_REPOSITORY = "sandbox-base"
REGISTRY_BASE_IMAGE = "debian:bookworm-slim"
DEBIAN_SUITE = "bookworm"
DEBOOTSTRAP_VARIANT = "minbase"
DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
MIRROR_ENV = "SANDBOX_DEBIAN_MIRROR"
SECURITY_MIRROR_ENV = "SANDBOX_DEBIAN_SECURITY_MIRROR"
CACHE_DIR_ENV = "SANDBOX_CACHE_DIR"
DEFAULT_CACHE_DIR = Path("/var/cache/sandbox-platform")

LABEL_IMAGE = "sandbox.image"
LABEL_CONTENT_HASH = "sandbox.content-hash"

DEBOOTSTRAP_TIMEOUT_S = 900.0
BUILD_HTTP_TIMEOUT_S = 900
_IMAGE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")  # what a Docker repository name allows
_COMPLETE_MARKER = "COMPLETE"
_DEBOOTSTRAP_PHASE_ENDINGS = ("packages...", " system...", "successfully.")
_RUNNER_CONTEXT_DIR = "runner"
_IMAGE_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
)


# --------------------------------------------------------------------------- locations


def repo_root() -> Path:
    """The checkout this package runs from (it is installed editable)."""
    return Path(__file__).resolve().parents[2]


def images_dir() -> Path:
    """``images/`` at the repository root."""
    return repo_root() / "images"


def runner_dir() -> Path:
    """``sandbox/runner``: the sources copied into every image."""
    return repo_root() / "sandbox" / "runner"


def cache_dir() -> Path:
    """Where base root filesystems are kept (``$SANDBOX_CACHE_DIR`` overrides)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR)


def image_names() -> tuple[str, ...]:
    """Names of the images: the directories of ``images/`` that hold a Dockerfile."""
    root = images_dir()
    if not root.is_dir():
        return ()
    return tuple(
        sorted(
            entry.name
            for entry in root.iterdir()
            if entry.is_dir()
            and entry.name != BASE_NAME
            and _IMAGE_NAME.fullmatch(entry.name)
            and (entry / "Dockerfile").is_file()
        )
    )


#: The images of this checkout (a new directory under images/ adds one).
IMAGE_NAMES: tuple[str, ...] = image_names()


# --------------------------------------------------------------------------- hashing


def _is_ignored(rel: Path) -> bool:
    return "__pycache__" in rel.parts or rel.suffix in (".pyc", ".pyo")


def _files(root: Path, pattern: str = "*") -> list[tuple[str, Path]]:
    """(posix relative path, path) of the files under ``root``, sorted."""
    if not root.is_dir():
        return []
    found = []
    for path in root.rglob(pattern):
        rel = path.relative_to(root)
        if path.is_file() and not path.is_symlink() and not _is_ignored(rel):
            found.append((rel.as_posix(), path))
    return sorted(found)


def _runner_files() -> list[tuple[str, Path]]:
    return _files(runner_dir(), "*.py")


def _digest(parts: Iterable[str], trees: Iterable[tuple[str, list[tuple[str, Path]]]]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode()
        h.update(b"P%d:" % len(data) + data)
    for label, files in trees:
        h.update(b"T%d:%s" % (len(label), label.encode()))
        for rel, path in files:
            data = path.read_bytes()
            executable = b"x" if path.stat().st_mode & 0o111 else b"-"
            name = rel.encode()
            h.update(b"F%d:%s%s%d:" % (len(name), name, executable, len(data)))
            h.update(data)
    return h.hexdigest()[:HASH_HEX_DIGITS]


def _base_hash() -> str:
    recipe = ("base", BUILD_FORMAT, DEBIAN_SUITE, DEBOOTSTRAP_VARIANT)
    return _digest(recipe, [("base", _files(images_dir() / BASE_NAME))])


def base_tag() -> str:
    """Tag of the debootstrap base image for the current sources."""
    return f"{BASE_REPOSITORY}:{_base_hash()}"


def _check_base(base: str) -> BaseKind:
    if base == "debootstrap":
        return "debootstrap"
    if base == "registry":
        return "registry"
    raise InvalidRequestError(f"unknown base {base!r}; use one of {', '.join(BASE_KINDS)}")


def _check_name(name: str) -> None:
    names = image_names()
    if name not in names:
        raise NotFoundError(
            f"unknown image {name!r}; known: {', '.join(names) or '(none)'} "
            f"(an image is a directory images/<name>/ with a Dockerfile)"
        )


def _image_hash(
    name: str,
    base: BaseKind,
    image_files: list[tuple[str, Path]] | None = None,
    runner_files: list[tuple[str, Path]] | None = None,
) -> str:
    """Hash of an image's sources (by default read from the checkout)."""
    if image_files is None:
        image_files = _files(images_dir() / name)
    if runner_files is None:
        runner_files = _runner_files()
    base_part = base_tag() if base == "debootstrap" else f"registry {REGISTRY_BASE_IMAGE}"
    parts = ("image", BUILD_FORMAT, name, base_part)
    return _digest(parts, [("image", image_files), ("runner", runner_files)])


def image_tag(name: str, base: str = "debootstrap") -> str:
    """Tag ``sandbox-<name>:<hash>`` that image ``name`` has for the current sources."""
    _check_name(name)
    return f"sandbox-{name}:{_image_hash(name, _check_base(base))}"


# --------------------------------------------------------------------------- engine queries


def _has_image(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
    except ImageNotFound:
        return False
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot inspect image {ref}: {exc}") from exc
    return True


def resolve_image(name: str, base: str | None = None) -> str:
    """The tag to run for image ``name``: built from the current sources.

    With ``base=None`` the debootstrap-based image is preferred and the
    registry-based one accepted. Raises :class:`NotFoundError` when the engine
    lacks it.
    """
    kinds = BASE_KINDS if base is None else (_check_base(base),)
    tags = [image_tag(name, kind) for kind in kinds]
    client = docker_client()
    try:
        for tag in tags:
            if _has_image(client, tag):
                return tag
    finally:
        client.close()
    raise NotFoundError(f"image {tags[0]} is not built; run `sandbox images build`")


def list_images() -> list[dict[str, Any]]:
    """For each image (and the base): its current tags and whether they exist.

    ``stale`` lists other hash tags of the same repository (older builds).
    """
    client = docker_client()
    try:
        rows = []
        repos: list[tuple[str, str, list[tuple[str, str]]]] = [
            (BASE_NAME, BASE_REPOSITORY, [("debootstrap", base_tag())])
        ]
        for name in image_names():
            repos.append(
                (name, f"sandbox-{name}", [(kind, image_tag(name, kind)) for kind in BASE_KINDS])
            )
        for name, repository, tags in repos:
            current = {tag for _, tag in tags}
            existing = {
                tag
                for image in client.images.list(name=repository)
                for tag in image.tags
                if tag.startswith(repository + ":")
            }
            rows.append(
                {
                    "name": name,
                    "tags": [
                        {"base": kind, "tag": tag, "built": tag in existing} for kind, tag in tags
                    ],
                    "stale": sorted(existing - current),
                }
            )
        return rows
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot list images: {exc}") from exc
    finally:
        client.close()


# --------------------------------------------------------------------------- building


def build_images(
    names: Sequence[str] | None = None,
    *,
    base: str = "debootstrap",
    progress: Progress = logger.info,
) -> list[str]:
    """Build the images ``names`` (default: all) that are not built yet.

    ``base="debootstrap"`` builds the local base first when it is missing (needs
    root); ``base="registry"`` builds ``FROM debian:bookworm-slim`` (needs a
    registry). Returns the tags, built now or before.
    """
    kind = _check_base(base)
    selected = list(image_names() if names is None else names)
    for name in selected:
        _check_name(name)
    client = docker_client(timeout=BUILD_HTTP_TIMEOUT_S)
    try:
        with _build_lock(progress):
            if kind == "debootstrap":
                base_ref = _ensure_base_image(client, progress)
            else:
                base_ref = REGISTRY_BASE_IMAGE
            return _build_all(selected, kind, base_ref, progress)
    finally:
        client.close()


def _build_all(
    names: Sequence[str], base: BaseKind, base_ref: str, progress: Progress
) -> list[str]:
    """Build ``names`` at the same time (their package installs wait mostly on the network
    and the disk), each with a client of its own; the tags in ``names``' order."""

    def build(name: str) -> str:
        client = docker_client(timeout=BUILD_HTTP_TIMEOUT_S)
        try:
            return _build_image(client, name, base, base_ref, progress)
        finally:
            client.close()

    with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="image-build") as pool:
        return list(pool.map(build, names))


@contextlib.contextmanager
def _build_lock(progress: Progress) -> Iterator[None]:
    """Serialise builders on this machine (two builds of one tag would leave a dangling image)."""
    path = cache_dir() / "build.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError:  # not root: the base cannot be built anyway; still serialise the rest
        path = Path(tempfile.gettempdir()) / "sandbox-images-build.lock"
    with exclusive(path, lambda: progress("another image build runs on this machine; waiting")):
        yield


def _build_image(
    client: docker.DockerClient, name: str, base: BaseKind, base_ref: str, progress: Progress
) -> str:
    tag = image_tag(name, base)
    if _has_image(client, tag):
        progress(f"{tag} is up to date")
        return tag
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"sandbox-build-{name}-") as tmp:
        context = Path(tmp) / "context"
        _assemble_context(name, context)
        # Hash the copies that are built, so that an edit made meanwhile cannot
        # end up under the tag of other sources.
        runner_prefix = _RUNNER_CONTEXT_DIR + "/"
        image_copy = [(rel, p) for rel, p in _files(context) if not rel.startswith(runner_prefix)]
        runner_copy = _files(context / _RUNNER_CONTEXT_DIR)
        content_hash = _image_hash(name, base, image_copy, runner_copy)
        tag = f"sandbox-{name}:{content_hash}"
        if _has_image(client, tag):
            progress(f"{tag} is up to date")
            return tag
        progress(f"building {tag} from {base_ref}")
        tail: deque[str] = deque(maxlen=25)
        try:
            stream = client.api.build(
                path=str(context),
                tag=tag,
                buildargs={"BASE_IMAGE": base_ref, "CONTENT_HASH": content_hash},
                labels={LABEL_IMAGE: name, LABEL_CONTENT_HASH: content_hash},
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            for chunk in stream:
                _log_build_chunk(name, chunk, tail, progress)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"building {tag} failed: {exc}") from exc
        except InfrastructureError as exc:
            if base != "registry":
                raise
            raise InfrastructureError(
                f"{exc}\n(--base registry pulls {REGISTRY_BASE_IMAGE}; where no registry is "
                "reachable, build with the default --base debootstrap)"
            ) from exc
    if not _has_image(client, tag):
        raise InfrastructureError(f"building {tag} ended without an image; see the log above")
    progress(f"built {tag} in {time.monotonic() - started:.0f} s")
    return tag


def _assemble_context(name: str, context: Path) -> None:
    """The image's directory plus ``runner/`` (the runner's sources)."""
    image_files = _files(images_dir() / name)
    if any(rel.split("/", 1)[0] == _RUNNER_CONTEXT_DIR for rel, _ in image_files):
        raise InvalidRequestError(
            f"images/{name}/{_RUNNER_CONTEXT_DIR} is reserved for the runner's sources; rename it"
        )
    runner_files = [(f"{_RUNNER_CONTEXT_DIR}/{rel}", path) for rel, path in _runner_files()]
    (context / _RUNNER_CONTEXT_DIR).mkdir(parents=True)
    for rel, path in image_files + runner_files:
        target = context / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _log_build_chunk(name: str, chunk: Any, tail: deque[str], progress: Progress) -> None:
    if not isinstance(chunk, dict):
        return
    if "error" in chunk:
        detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
        raise InfrastructureError(
            f"building image {name!r} failed: {detail.strip()}\n" + "".join(tail)
        )
    text = chunk.get("stream")
    if text:
        for line in text.splitlines():
            if not line.strip():
                continue
            tail.append(line + "\n")
            if line.startswith("Step "):
                progress(f"{name}: {' '.join(line.split())[:110]}")
            else:
                logger.debug("%s: %s", name, line)
    elif chunk.get("status"):
        logger.debug("%s: %s %s", name, chunk["status"], chunk.get("progress", ""))


def _ensure_base_image(client: docker.DockerClient, progress: Progress) -> str:
    tag = base_tag()
    if _has_image(client, tag):
        progress(f"{tag} is up to date")
        return tag
    rootfs = _ensure_rootfs(tag.split(":", 1)[1], progress)
    _import_rootfs(client, rootfs, tag, progress)
    return tag


def _import_rootfs(client: docker.DockerClient, rootfs: Path, tag: str, progress: Progress) -> None:
    repository, content_hash = tag.split(":", 1)
    progress(f"importing {rootfs} as {tag}")
    started = time.monotonic()
    changes = [
        *(f"ENV {env}" for env in _IMAGE_ENV),
        'CMD ["/bin/bash"]',
        f"LABEL {LABEL_IMAGE}={BASE_NAME}",
        f"LABEL {LABEL_CONTENT_HASH}={content_hash}",
    ]
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tar.stdout is not None and tar.stderr is not None
    try:
        result = client.api.import_image_from_stream(
            tar.stdout, repository=repository, tag=content_hash, changes=changes
        )
    except (DockerException, requests.exceptions.RequestException) as exc:
        tar.kill()
        tar.wait()
        raise EngineError(f"docker import of {rootfs} failed: {exc}") from exc
    finally:
        tar.stdout.close()
    stderr = tar.stderr.read().decode(errors="replace")
    tar.stderr.close()
    if tar.wait() != 0:
        raise InfrastructureError(f"tar of {rootfs} failed: {stderr.strip()}")
    if not _has_image(client, tag):
        raise EngineError(f"docker import did not create {tag}: {result!r}")
    progress(f"imported {tag} in {time.monotonic() - started:.0f} s")


# --------------------------------------------------------------------------- base rootfs


def _mirror() -> str:
    return os.environ.get(MIRROR_ENV) or DEFAULT_DEBIAN_MIRROR


def _sources_list(mirror: str) -> str:
    """APT sources of the base: the mirror, plus updates and security on Debian's own."""
    lines = [f"deb {mirror} {DEBIAN_SUITE} main"]
    security = os.environ.get(SECURITY_MIRROR_ENV)
    if mirror.rstrip("/") == DEFAULT_DEBIAN_MIRROR or security:
        lines.append(f"deb {mirror} {DEBIAN_SUITE}-updates main")
        lines.append(f"deb {security or DEFAULT_SECURITY_MIRROR} {DEBIAN_SUITE}-security main")
    return "\n".join(lines) + "\n"


def _ensure_rootfs(content_hash: str, progress: Progress) -> Path:
    """A complete debootstrap root filesystem for ``content_hash`` (reused if there)."""
    cache = cache_dir()
    final = cache / f"base-{content_hash}"
    if (final / _COMPLETE_MARKER).is_file():
        progress(f"reusing the base root filesystem {final / 'rootfs'}")
        return final / "rootfs"
    if os.geteuid() != 0:
        raise InfrastructureError(
            "building the base image runs debootstrap, which needs root: run "
            "`sudo .venv/bin/sandbox images build`, or `sandbox images build --base registry` "
            "where a registry is reachable"
        )
    install_missing_packages({"debootstrap": "debootstrap"}, progress=progress)
    cache.mkdir(parents=True, exist_ok=True)
    if final.exists():  # incomplete: only a crash between rename and marker leaves this
        _remove_tree(final)
    work = Path(tempfile.mkdtemp(prefix=f".base-{content_hash}-", dir=cache))
    try:
        rootfs = work / "rootfs"
        mirror = _mirror()
        started = time.monotonic()
        _debootstrap(rootfs, mirror, progress)
        elapsed = time.monotonic() - started
        _finish_rootfs(rootfs, mirror)
        marker = {"suite": DEBIAN_SUITE, "mirror": mirror, "debootstrap_s": round(elapsed, 1)}
        (work / _COMPLETE_MARKER).write_text(json.dumps(marker) + "\n")
        try:
            os.rename(work, final)
        except OSError:
            if not (final / _COMPLETE_MARKER).is_file():
                raise
            _remove_tree(work)  # another build finished the same rootfs first
        progress(f"debootstrap finished in {elapsed:.0f} s")
    except BaseException:
        _remove_tree(work)
        raise
    _prune_rootfs(cache, keep=final)
    return final / "rootfs"


def _debootstrap(rootfs: Path, mirror: str, progress: Progress) -> None:
    argv = [
        "debootstrap",
        f"--variant={DEBOOTSTRAP_VARIANT}",
        DEBIAN_SUITE,
        str(rootfs),
        mirror,
    ]
    progress(f"running {' '.join(argv)} (about 30-40 s)")
    env = {
        **os.environ,
        "LC_ALL": "C",
        "DEBIAN_FRONTEND": "noninteractive",
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    }
    tail: deque[str] = deque(maxlen=30)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
        errors="replace",
        start_new_session=True,  # its own process group, so that _kill_group reaches dpkg too
    )
    assert proc.stdout is not None
    watchdog = threading.Timer(DEBOOTSTRAP_TIMEOUT_S, _kill_group, (proc,))
    watchdog.start()
    seen: set[str] = set()
    try:
        for raw in proc.stdout:
            line = raw.rstrip()
            tail.append(raw)
            logger.debug("debootstrap: %s", line)
            # Report each phase once, not each package ("I: Retrieving adduser ...").
            words = line.split()
            if len(words) < 2 or words[0] != "I:":
                continue
            if words[1] not in seen or line.endswith(_DEBOOTSTRAP_PHASE_ENDINGS):
                seen.add(words[1])
                progress(f"debootstrap: {line[3:]}")
        code = proc.wait()
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        watchdog.cancel()
    if code != 0:
        raise InfrastructureError(
            f"debootstrap of {DEBIAN_SUITE} from {mirror} failed (exit {code}); set "
            f"{MIRROR_ENV} to a reachable Debian mirror if this one is not:\n" + "".join(tail)
        )


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill debootstrap and what it started (dpkg in the chroot), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Its children are reparented, not reaped by us: wait until the group is gone.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def _finish_rootfs(rootfs: Path, mirror: str) -> None:
    """Overlay images/base/rootfs, write the APT sources, drop caches and host details."""
    overlay = images_dir() / BASE_NAME / "rootfs"
    for rel, path in _files(overlay):
        target = rootfs / rel
        _refuse_symlinks(rootfs, target)
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        os.chmod(target, 0o755 if os.access(path, os.X_OK) else 0o644)
    (rootfs / "etc/apt/sources.list").write_text(_sources_list(mirror))
    # debootstrap copies the host's resolv.conf and hostname; the engine supplies its own.
    for rel in ("etc/resolv.conf", "etc/hostname"):
        target = rootfs / rel
        if target.is_symlink() or target.exists():
            target.unlink()
            target.write_text("")
    for rel in ("var/lib/apt/lists", "var/cache/apt/archives", "var/log"):
        folder = rootfs / rel
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry.is_file() and not entry.is_symlink() and entry.name != "lock":
                entry.unlink()
    for leftover in ("var/cache/apt/pkgcache.bin", "var/cache/apt/srcpkgcache.bin"):
        with contextlib.suppress(FileNotFoundError):
            (rootfs / leftover).unlink()


def _refuse_symlinks(root: Path, target: Path) -> None:
    """Never write through a link inside the rootfs (it would point at the host)."""
    current = root
    for part in target.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            raise InfrastructureError(f"{current} is a symlink in the base rootfs; cannot overlay")


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [line.split()[1].replace("\\040", " ") for line in lines if len(line.split()) > 1]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def _remove_tree(path: Path) -> None:
    """Delete a (possibly half-built) rootfs, unmounting what debootstrap left mounted."""
    if not path.exists():
        return
    for point in _mounts_under(path):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    left = _mounts_under(path)
    if left:
        raise InfrastructureError(f"cannot remove {path}: still mounted: {', '.join(left)}")
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        logger.warning("could not remove all of %s; delete it by hand", path)


def _prune_rootfs(cache: Path, *, keep: Path) -> None:
    """Remove the root filesystems of other base hashes (each is ~200 MB)."""
    for entry in cache.glob("base-*"):
        if entry != keep and entry.is_dir() and not entry.is_symlink():
            logger.info("removing the outdated base root filesystem %s", entry)
            _remove_tree(entry)
