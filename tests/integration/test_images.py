"""The engine setup and the built images, against the real Docker engine."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from sandbox.host import images
from sandbox.host.engine import RUNTIME_RUNSC, docker_client, engine_status, ensure_engine

pytestmark = pytest.mark.docker

SANDBOX_UID = 10001


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    ensure_engine()
    c = docker_client(timeout=300)
    yield c
    c.close()


@pytest.fixture(scope="module")
def python_image(client: docker.DockerClient) -> str:
    (tag,) = images.build_images(["python"])
    return tag


def run(
    client: docker.DockerClient,
    image: str,
    argv: list[str],
    *,
    user: str | None = None,
    runtime: str | None = None,
) -> str:
    """Output of ``argv`` in a fresh network-less container of ``image``."""
    out = client.containers.run(
        image, argv, remove=True, network_disabled=True, user=user, runtime=runtime
    )
    return out.decode()


def test_resolve_image_returns_the_built_tag(python_image: str) -> None:
    assert images.resolve_image("python") == python_image
    assert python_image == images.image_tag("python")


def test_labels(client: docker.DockerClient, python_image: str) -> None:
    labels = client.images.get(python_image).labels
    assert labels[images.LABEL_IMAGE] == "python"
    assert labels[images.LABEL_CONTENT_HASH] == python_image.split(":")[1]
    base_labels = client.images.get(images.base_tag()).labels
    assert base_labels[images.LABEL_IMAGE] == "base"


def test_python_with_libraries(client: docker.DockerClient, python_image: str) -> None:
    out = run(
        client,
        python_image,
        ["python3", "-c", "import sys, pytest, numpy, yaml; print(sys.version_info >= (3, 11))"],
        user=f"{SANDBOX_UID}:{SANDBOX_UID}",
    )
    assert out.strip() == "True"


def test_sandbox_user_and_directories(client: docker.DockerClient, python_image: str) -> None:
    assert run(client, python_image, ["id", "sandbox"]).strip() == (
        "uid=10001(sandbox) gid=10001(sandbox) groups=10001(sandbox)"
    )
    out = run(client, python_image, ["stat", "-c", "%n %u %g %a", "/workspace", "/judge"])
    assert out.split("\n")[:2] == ["/workspace 10001 10001 755", "/judge 10002 10002 700"]


def test_runner_is_read_only_for_the_sandbox_user(
    client: docker.DockerClient, python_image: str
) -> None:
    script = (
        "import os, pathlib\n"
        "root = pathlib.Path('/opt/sandbox/runner')\n"
        "assert root.is_dir()\n"
        "paths = [root, *root.rglob('*')]\n"
        "assert all(p.stat().st_uid == 0 for p in paths)\n"
        "assert not any(os.access(p, os.W_OK) for p in paths)\n"
        "try:\n"
        "    (root / 'planted.py').write_text('x')\n"
        "except PermissionError:\n"
        "    print('refused', len(paths))\n"
    )
    out = run(client, python_image, ["python3", "-c", script], user=str(SANDBOX_UID))
    assert out.startswith("refused ")
    runner_sources = [rel for rel, _ in images._runner_files()]
    listing = run(client, python_image, ["ls", "/opt/sandbox/runner"]).split()
    assert set(p.split("/")[0] for p in runner_sources) <= set(listing)


@pytest.mark.parametrize("name", images.IMAGE_NAMES)
def test_c_utf8_comes_from_the_locale_archive(client: docker.DockerClient, name: str) -> None:
    """Each image has C.UTF-8 in glibc's locale archive, and it is a UTF-8 locale there."""
    image = images.resolve_image(name)
    assert run(client, image, ["localedef", "--list-archive"]).split() == ["C.utf8"]
    out = client.containers.run(
        image,
        ["bash", "-c", "printf '\\303\\251' | wc -m; locale charmap"],
        remove=True,
        network_disabled=True,
        user=f"{SANDBOX_UID}:{SANDBOX_UID}",
        environment={"LANG": "C.UTF-8"},
    )
    assert out.decode().split() == ["1", "UTF-8"]  # one character (é), not two bytes


def test_image_runs_under_gvisor(client: docker.DockerClient, python_image: str) -> None:
    out = run(client, python_image, ["python3", "-c", "print(6 * 7)"], runtime=RUNTIME_RUNSC)
    assert out.strip() == "42"


def test_ensure_engine_is_idempotent(client: docker.DockerClient) -> None:
    before = engine_status()
    ensure_engine()
    ensure_engine()
    after = engine_status()
    assert before["running"] and after["running"]
    assert before["dockerd_pid"] == after["dockerd_pid"]
    assert not after["missing_runtimes"]


def test_second_build_rebuilds_nothing(client: docker.DockerClient, python_image: str) -> None:
    image_id = client.images.get(python_image).id
    messages: list[str] = []
    tags = images.build_images(progress=messages.append)
    assert python_image in tags
    # the base and every image
    assert sum("up to date" in m for m in messages) == 1 + len(images.IMAGE_NAMES), messages
    assert not any(m.startswith(("building", "importing", "running")) for m in messages), messages
    assert client.images.get(python_image).id == image_id
