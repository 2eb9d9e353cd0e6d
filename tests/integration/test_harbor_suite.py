"""The shipped Harbor-format tasks (``sandbox/evals/harbor_suite``), run for real.

Every task passes ``harbor lint`` (the real ``harbor`` package, in its own venv)
and keeps to the suite's rules (its own ``environment/Dockerfile`` FROM one of
our images, no network, a non-root agent, a separate verifier that sees only the
agent's ``/workspace``). Each trial follows Harbor's separate-verifier flow on
the real engine: the task's Dockerfile is built (``FROM sandbox-<name>`` mapped
to the tag of the current sources; cached by a hash of the context), the
"agent" runs as uid 10001 in a read-only container with only ``/workspace``
writable, under the task's cpus and memory; then ``/workspace`` is collected
through tarfile's ``data`` filter (as Harbor's artifact handler does) into a
fresh container of the same image, ``tests/`` goes to ``/tests`` and
``tests/test.sh`` runs as root there, writing ``/logs/verifier/reward.txt``.
The reference solution must score 1 there; doing nothing, and the wrong or
partial solution shipped for each task in ``fixtures/harbor_partial/``, are shown
to score 0 through our own evaluator (``test_harbor_suite_eval.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from docker.models.containers import Container

from sandbox.backends.docker import LABEL_MANAGED, LABEL_OWNER, owner_label
from sandbox.host.images import base_tag, image_names, resolve_image
from tests.conftest import REPO, harbor_bin

pytestmark = pytest.mark.docker

SUITE = REPO / "sandbox" / "evals" / "harbor_suite"
PARTIAL = Path(__file__).resolve().parent / "fixtures" / "harbor_partial"
TASKS = sorted(p.parent.name for p in SUITE.glob("*/task.toml"))
AGENT_UID = "10001:10001"
FROM_LINE = re.compile(r"^(\s*FROM\s+)(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)
BUILD_TIMEOUT_S = 900


@dataclass(frozen=True)
class HarborTask:
    """One task directory and its parsed ``task.toml``."""

    name: str
    root: Path
    config: dict[str, Any]

    @property
    def environment(self) -> dict[str, Any]:
        return dict(self.config.get("environment", {}))

    def timeout(self, section: str) -> int:
        return int(self.config[section]["timeout_sec"])


def load(name: str) -> HarborTask:
    root = SUITE / name
    return HarborTask(name, root, tomllib.loads((root / "task.toml").read_text()))


@pytest.fixture(scope="module")
def docker_api() -> Iterator[docker.DockerClient]:
    client = docker.from_env(timeout=BUILD_TIMEOUT_S)
    yield client
    client.close()


@pytest.fixture(scope="module")
def local_images() -> dict[str, str]:
    """``sandbox-<name>`` to the tag built from the current sources."""
    images = {f"sandbox-{name}": resolve_image(name) for name in image_names()}
    images["sandbox-base"] = base_tag()
    return images


_built: dict[str, str] = {}


def build_environment(client: docker.DockerClient, task: HarborTask, images: dict[str, str]) -> str:
    """Build ``environment/`` with its FROM lines mapped to local tags; cached by content."""
    if task.name in _built:
        return _built[task.name]
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "context"
        shutil.copytree(task.root / "environment", context)
        dockerfile = context / "Dockerfile"

        def local(match: re.Match[str]) -> str:
            image = match.group(2)
            assert image in images, f"{task.name}: FROM {image} is not one of our images {images}"
            return f"{match.group(1)}{images[image]}{match.group(3)}"

        dockerfile.write_text(FROM_LINE.sub(local, dockerfile.read_text()))
        digest = hashlib.sha256()
        for path in sorted(p for p in context.rglob("*") if p.is_file()):
            digest.update(f"{path.relative_to(context)}\0{path.stat().st_mode:o}\0".encode())
            digest.update(path.read_bytes())
        tag = f"harbor-suite-{task.name}:{digest.hexdigest()[:12]}"
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            client.images.build(path=str(context), tag=tag, rm=True, timeout=BUILD_TIMEOUT_S)
    _built[task.name] = tag
    return tag


def tar_of(directory: Path, uid: int = 10001) -> bytes:
    """A tar of ``directory``'s contents (relative names), owned by ``uid``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(directory.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(directory)))
            info.uid = info.gid = uid
            info.uname = info.gname = ""
            if info.isreg():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return buf.getvalue()


class Sandbox:
    """A container of the task image plus the volumes it writes to; removed on exit."""

    def __init__(
        self,
        client: docker.DockerClient,
        image: str,
        task: HarborTask,
        *,
        user: str,
        mounts: tuple[str, ...],
        cap_add: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        labels = {LABEL_MANAGED: "1", LABEL_OWNER: owner_label(), "sandbox.test": "harbor-suite"}
        self.volumes = {
            path: client.volumes.create(f"harbor-suite-{uuid.uuid4().hex[:12]}", labels=labels)
            for path in mounts
        }
        env = task.environment
        self.container: Container = client.containers.run(
            image,
            ["sleep", "infinity"],
            detach=True,
            init=True,
            user=user,
            read_only=True,
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=list(cap_add),
            security_opt=["no-new-privileges"],
            pids_limit=1024,
            nano_cpus=int(float(env.get("cpus", 1)) * 1e9),
            mem_limit=f"{int(env.get('memory_mb', 1024))}m",
            tmpfs={"/tmp": "rw,exec,nosuid,size=512m"},
            volumes={v.name: {"bind": path, "mode": "rw"} for path, v in self.volumes.items()},
            working_dir="/workspace",
            labels=labels,
        )

    def run(self, command: str, timeout_s: int, user: str | None = None) -> tuple[int, str]:
        """Run ``command`` under bash with a time limit; exit code and combined output."""
        argv = ["timeout", "-k", "5", str(timeout_s), "bash", "-c", command]
        result = self.container.exec_run(argv, user=user or "", workdir="/workspace")
        return result.exit_code, result.output.decode(errors="replace")

    def upload(self, directory: Path, target: str, uid: int) -> None:
        assert self.container.put_archive(target, tar_of(directory, uid))

    def download(self, path: str, into: Path) -> None:
        """Copy ``path`` out into ``into`` through tarfile's ``data`` filter.

        As Harbor's artifact handler does, members the filter refuses (absolute
        links, links leaving the tree, special files) are skipped.
        """
        stream, _ = self.container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            for member in tar.getmembers():
                try:
                    tar.extract(member, into, filter="data")
                except tarfile.FilterError:
                    continue

    def read(self, path: str) -> str:
        """The text of the file ``path`` (through the archive API, not an exec)."""
        stream, _ = self.container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile(tar.getmembers()[0])
            assert member is not None, path
            return member.read().decode()

    def close(self) -> None:
        self.container.remove(force=True)
        for volume in self.volumes.values():
            volume.remove(force=True)


@contextmanager
def sandbox(*args: Any, **kwargs: Any) -> Iterator[Sandbox]:
    box = Sandbox(*args, **kwargs)
    try:
        yield box
    finally:
        box.close()


def trial(client: docker.DockerClient, image: str, task: HarborTask) -> str:
    """Run the reference solution as the agent (its folder in ``/solution``), then the
    verifier; the reward text and ``test.sh``'s output."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with sandbox(
            client, image, task, user=AGENT_UID, mounts=("/workspace", "/solution")
        ) as agent:
            agent.upload(task.root / "solution", "/solution", 10001)
            code, out = agent.run("bash /solution/solve.sh", task.timeout("agent"))
            assert code == 0, f"{task.name}: solve.sh failed ({code}):\n{out}"
            agent.download("/workspace", work / "artifact")
        with sandbox(
            client,
            image,
            task,
            user="0:0",
            mounts=("/workspace", "/tests", "/logs/verifier"),
            cap_add=("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"),
        ) as verifier:
            code, out = verifier.run("find /workspace -mindepth 1 -delete", 60)
            assert code == 0, out
            verifier.upload(work / "artifact" / "workspace", "/workspace", 10001)
            verifier.upload(task.root / "tests", "/tests", 0)
            code, out = verifier.run("bash /tests/test.sh", task.timeout("verifier"))
            try:
                reward = verifier.read("/logs/verifier/reward.txt")
            except docker.errors.NotFound:
                pytest.fail(f"{task.name}: no reward file; test.sh exited {code}:\n{out}")
            return reward.strip() + "\n--- test.sh output ---\n" + out


def test_the_suite_has_ten_tasks_or_more() -> None:
    assert len(TASKS) >= 10, TASKS
    assert sorted(p.stem for p in PARTIAL.glob("*.sh")) == TASKS


def test_every_task_passes_harbor_lint() -> None:
    harbor = harbor_bin()
    dirs = [str(SUITE / name) for name in TASKS]
    done = subprocess.run(
        [str(harbor), "lint", "--extend-select", "root-agent", "--json", *dirs],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize("name", TASKS)
def test_task_keeps_to_the_suite_rules(name: str) -> None:
    task = load(name)
    env = task.environment
    assert task.config["verifier"]["environment_mode"] == "separate"
    assert task.config["artifacts"] == ["/workspace"]
    assert task.config["agent"]["user"] == "sandbox"
    assert env["network_mode"] == "no-network"
    assert env["workdir"] == "/workspace"
    assert {"cpus", "memory_mb", "storage_mb"} <= set(env)
    froms = FROM_LINE.findall((task.root / "environment" / "Dockerfile").read_text())
    assert froms and all(image.startswith("sandbox-") for _, image, _ in froms), froms
    for rel in ("instruction.md", "solution/solve.sh", "tests/test.sh"):
        assert (task.root / rel).read_text().strip(), rel


@pytest.mark.parametrize("name", TASKS)
def test_the_reference_passes_in_harbors_flow(
    name: str, docker_api: docker.DockerClient, local_images: dict[str, str]
) -> None:
    """The reference solution scores 1 in Harbor's separate-verifier flow, where
    ``test.sh`` runs as root and starts the agent's programs through ``setpriv``. (Doing
    nothing and the partial fixes scoring 0 are judged through our own evaluator, in
    ``test_harbor_suite_eval.py``: the same ``test.sh`` there starts them through
    ``agent-run``.)"""
    task = load(name)
    image = build_environment(docker_api, task, local_images)
    oracle = trial(docker_api, image, task)
    assert oracle.startswith("1\n"), oracle
