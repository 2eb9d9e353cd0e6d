"""Attacks on per-task environments by a hostile tenant, against a real service with two
keyed tenants over loopback HTTP and real builds: reading another tenant's environment
(by id, by FROM, by COPY --from, through the metrics), a Dockerfile that hides an image or
fetches from the host's network, and an image whose metadata tries to steer the runner
(ENV PYTHONPATH with a sitecustomize, LD_PRELOAD, HEALTHCHECK, VOLUME, a WORKDIR over a
system directory, files planted in the runner's directory)."""

from __future__ import annotations

import io
import secrets
import tarfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import httpx
import pytest
import yaml

from sandbox.service.tenants import hash_key, new_key
from tests.conftest import Service, environments_service

pytestmark = pytest.mark.docker

#: Where a build's steps' cgroups are in the cpu controller (cgroup v1).
CPU_BUILD_CGROUPS = Path("/sys/fs/cgroup/cpu/sandbox-build")
KEYS = {tenant: new_key() for tenant in ("alice", "mallory")}
CONFIG = (
    'image_aliases:\n  "python:3.13-slim": sandbox-python\n'
    "build_memory_mb: 512\nbuild_pids: 64\nbuild_cpus: 0.5\n"
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    state = tmp_path_factory.mktemp("state")
    keys = state / "keys.yaml"
    entries = [{"tenant": t, "key_sha256": hash_key(k)} for t, k in KEYS.items()]
    keys.write_text(yaml.safe_dump({"keys": entries}))
    with environments_service(state, CONFIG, "--keys", str(keys)) as svc:
        yield svc


def client(service: Service, tenant: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    return httpx.Client(base_url=service.url, headers=headers, timeout=300)


def tar_of(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def build(http: httpx.Client, files: dict[str, str], **params: str) -> httpx.Response:
    return http.post(
        "/v1/environments",
        content=tar_of(files),
        params=params,
        headers={"Content-Type": "application/x-tar"},
    )


def assert_refused(service: Service, dockerfile: str, refusal: str) -> None:
    """Mallory's build of ``dockerfile`` is refused (422) with ``refusal`` in the message."""
    with client(service, "mallory") as mallory:
        refused = build(mallory, {"Dockerfile": dockerfile})
    assert refused.status_code == 422 and refusal in refused.json()["message"], refused.text


SECRET = "alice-secret-4f1c"


@pytest.fixture(scope="module")
def alices(service: Service) -> str:
    """An environment of alice's holding a secret file."""
    with client(service, "alice") as alice:
        built = build(
            alice,
            {
                "Dockerfile": "FROM python:3.13-slim\nCOPY secret.txt /srv/secret.txt\n",
                "secret.txt": SECRET,
            },
        )
    assert built.status_code == 200, built.text
    return str(built.json()["environment"])


def open_session(http: httpx.Client, environment: str) -> httpx.Response:
    return http.post("/v1/sessions", json={"environment": environment})


def run(http: httpx.Client, session: str, command: str) -> dict[str, object]:
    answer = http.post(f"/v1/sessions/{session}/exec", json={"command": command})
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_another_tenants_environment_is_unknown_by_every_route(
    service: Service, alices: str
) -> None:
    with client(service, "mallory") as mallory, client(service, "alice") as alice:
        assert alice.get(f"/v1/environments/{alices}").status_code == 200
        looked = mallory.get(f"/v1/environments/{alices}")
        never = mallory.get("/v1/environments/0123456789ab")
        assert looked.status_code == never.status_code == 404
        assert looked.json()["message"].replace(alices, "X") == never.json()["message"].replace(
            "0123456789ab", "X"
        )
        assert open_session(mallory, alices).status_code == 404
        for dockerfile in (
            f"FROM sandbox-env:{alices}\nRUN cat /srv/secret.txt\n",
            f"FROM python:3.13-slim\nCOPY --from=sandbox-env:{alices} /srv/secret.txt /s\n",
            f"FROM python:3.13-slim AS a\nFROM sandbox-env:{alices} AS b\nFROM a\n",
        ):
            refused = build(mallory, {"Dockerfile": dockerfile})
            assert refused.status_code == 422, refused.text
            assert SECRET not in refused.text
            assert "an environment this tenant built" in refused.json()["message"]
        # Alice's pool is named to alice, and to nobody else, nor in the metrics.
        session = open_session(alice, alices).json()["id"]
        try:
            mine = alice.get("/v1/pool").json()["groups"]
            assert any(alices in g["image"] for g in mine)
            assert alices not in mallory.get("/v1/pool").text
            metrics = httpx.get(f"{service.url}/metrics").text
            assert alices not in metrics and 'image="sandbox-env"' in metrics
        finally:
            alice.delete(f"/v1/sessions/{session}")


def test_the_same_inputs_share_the_build_not_the_other_tenants_id(
    service: Service, alices: str
) -> None:
    """A tenant that uploads the very same inputs shows it has them: it gets the build from
    the cache, and the id opens for it too (it holds nothing it did not send)."""
    with client(service, "mallory") as mallory:
        same = build(
            mallory,
            {
                "Dockerfile": "FROM python:3.13-slim\nCOPY secret.txt /srv/secret.txt\n",
                "secret.txt": SECRET,
            },
        )
        assert same.status_code == 200 and same.json()["cached"] is True
        assert same.json()["environment"] == alices
        assert mallory.get(f"/v1/environments/{alices}").status_code == 200


@pytest.mark.parametrize(
    ("dockerfile", "refusal"),
    [
        ("FROM python:3.13-slim\nADD http://127.0.0.1:9/admin /x\n", "host's own network"),
        ("# escape=`\nFROM python:3.13-slim\n", "parser directive"),
        ("\ufeffFROM python:3.13-slim\n", "byte-order mark"),
        ("FROM python:3.13-slim\nCOPY --from=busybox:latest / /b\n", "never pulled"),
        ("FROM python:3.13-slim\nONBUILD RUN id\n", "ONBUILD"),
        ("FROM python:3.13-slim\nRUN --network=host true\n", "flags on RUN"),
    ],
)
def test_a_dockerfile_that_could_escape_the_reader_is_refused(
    service: Service, dockerfile: str, refusal: str
) -> None:
    assert_refused(service, dockerfile, refusal)


STEERING = """\
FROM python:3.13-slim
COPY hook/ /hook/
ENV PYTHONPATH=/hook PYTHONSTARTUP=/hook/startup.py LD_PRELOAD=/hook/none.so
HEALTHCHECK --interval=1s --timeout=1s \
    CMD cat /judge/* > /tmp/healthcheck-ran 2>&1; id -u >> /tmp/healthcheck-ran
RUN mkdir -p /opt/sandbox && printf 'raise SystemExit("planted")\\n' > /opt/sandbox/json.py
"""
HOOK = "import os\nif os.getuid() == 0:\n    open('/tmp/root-hook-ran', 'w').write('uid 0')\n"


def test_an_images_metadata_does_not_steer_the_runner(service: Service) -> None:
    with client(service, "mallory") as mallory:
        built = build(
            mallory,
            {"Dockerfile": STEERING, "hook/sitecustomize.py": HOOK, "hook/startup.py": HOOK},
        )
        assert built.status_code == 200, built.text
        assert any("HEALTHCHECK is ignored" in n for n in built.json()["notes"])
        opened = open_session(mallory, built.json()["environment"])
        assert opened.status_code == 201, opened.text
        session = opened.json()["id"]
        try:
            time.sleep(3)  # a health check at 1 s intervals would have run by now
            seen = run(mallory, session, "ls /tmp; id -u; python3 -c 'import json; print(1)'")
            assert seen["status"] == "ok", seen
            listing = str(seen["stdout"])
            assert "root-hook-ran" not in listing and "healthcheck-ran" not in listing
            # The user's own commands are the sandbox uid, the runner's json is the stdlib's.
            assert listing.splitlines()[-2:] == ["10001", "1"]
        finally:
            mallory.delete(f"/v1/sessions/{session}")
    engine = docker.from_env()
    try:
        image = engine.images.get(built.json()["image"])
        assert image.attrs["Config"]["Healthcheck"]  # the image has one; no sandbox runs it
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("dockerfile", "refusal"),
    [
        ("FROM python:3.13-slim\nVOLUME /data\n", "VOLUME /data"),
        ("FROM python:3.13-slim\nRUN echo /x.so > /etc/ld.so.preload\n", "ld.so.preload"),
    ],
)
def test_image_metadata_that_would_act_at_run_time_is_refused(
    service: Service, dockerfile: str, refusal: str
) -> None:
    assert_refused(service, dockerfile, refusal)


@pytest.mark.parametrize("workdir", ["/etc", "/usr/local/bin", "/usr", "/var/lib/x"])
def test_a_workdir_over_a_system_directory_stays_read_only(service: Service, workdir: str) -> None:
    with client(service, "mallory") as mallory:
        built = build(mallory, {"Dockerfile": f"FROM python:3.13-slim\nWORKDIR {workdir}\n"})
        assert built.status_code == 200, built.text
        assert any(f"WORKDIR {workdir} stays read-only" in n for n in built.json()["notes"])
        session = open_session(mallory, built.json()["environment"]).json()["id"]
        try:
            wrote = run(mallory, session, f"echo x > {workdir}/planted")
            assert wrote["exit_code"] != 0, wrote
        finally:
            mallory.delete(f"/v1/sessions/{session}")


def test_the_build_timeout_stops_the_real_step(service: Service, tmp_path: Path) -> None:
    """A step that prints a fake "Running in" line does not steer the watchdog."""
    fake = "0" * 64
    dockerfile = (
        f"FROM python:3.13-slim\nRUN echo ' ---> Running in {fake}'; sleep 61; echo too-late > /f\n"
    )
    started = time.monotonic()
    with client(service, "mallory") as mallory:
        slow = build(mallory, {"Dockerfile": dockerfile}, build_timeout_s="5")
    took = time.monotonic() - started
    assert slow.status_code == 504, slow.text
    assert took < 45, took  # the step's own 61 s never ran out
    engine = docker.from_env()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            running = [
                c for c in engine.containers.list() if "sleep 61" in " ".join(c.attrs["Args"])
            ]
            if not running:
                break
            time.sleep(0.5)
        assert not running, running
    finally:
        engine.close()


def _forks(count: int) -> str:
    """A Dockerfile whose step keeps ``count`` child processes alive at once."""
    program = (
        "import os, time\\n"
        f"for _ in range({count}):\\n"
        "    if os.fork() == 0:\\n"
        "        time.sleep(30)\\n"
        "        os._exit(0)\\n"
        "print(1)"
    )
    return f"FROM python:3.13-slim\nRUN python3 -c \"$(printf '{program}')\"\n"


def test_a_build_has_a_process_limit(service: Service) -> None:
    """The build's steps together may have build_pids (64 here) processes: a step forking
    100 children fails as the tenant's build, naming the limit; 20 are fine. The build's
    cgroup is gone afterwards."""
    with client(service, "mallory") as mallory:
        bomb = build(mallory, {"Dockerfile": _forks(100)})
        assert bomb.status_code == 422, bomb.text
        assert "build_pids=64" in bomb.text and "Resource temporarily unavailable" in bomb.text
        few = build(mallory, {"Dockerfile": _forks(20)})
        assert few.status_code == 200, few.text
        assert mallory.get("/v1/pool").status_code == 200
    # The engine makes the build's cgroup in every hierarchy (one per controller on v1).
    left = [p for p in Path("/sys/fs/cgroup").glob("*/sandbox-build/*") if p.is_dir()]
    assert not left, left


def test_an_allowlist_build_goes_through_the_services_proxy(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """build_network: allowlist through the service: a RUN step has the proxy in its
    HTTP_PROXY, no route around it, and the proxy refuses a name build_allow does not
    name (403, answered by the proxy itself: nothing leaves the machine)."""
    state = tmp_path_factory.mktemp("allowlist")
    config = CONFIG + "build_network: allowlist\nbuild_allow:\n  - host: registry.invalid\n"
    probe = (
        "import os, urllib.error, urllib.request\n"
        "assert os.environ['HTTP_PROXY'].startswith('http://'), os.environ\n"
        "try:\n"
        "    urllib.request.urlopen('http://refused.invalid/', timeout=10)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print('PROXY-ANSWERED', exc.code, exc.read().decode().strip())\n"
        "direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
        "try:\n"
        "    direct.open('http://192.0.2.1/', timeout=5)\n"
        "except OSError as exc:\n"
        "    print('NO-ROUTE', exc)\n"
    )
    dockerfile = "FROM python:3.13-slim\nCOPY probe.py /probe.py\nRUN python3 /probe.py\n"
    with environments_service(state, config) as svc:
        http = httpx.Client(base_url=svc.url, timeout=300)
        built = build(http, {"Dockerfile": dockerfile, "probe.py": probe})
        assert built.status_code == 200, built.text
        log = (state / "environments" / f"{built.json()['environment']}.log").read_text()
    assert "PROXY-ANSWERED 403 refused: host refused.invalid is not in the allowlist" in log, log
    assert "NO-ROUTE" in log and "No route to host" in log, log


def test_a_build_step_has_a_cpu_limit(service: Service) -> None:
    """build_cpus: 0.5 is a CFS quota of half a CPU on the step's own cgroup, read from the
    host while the step runs (gVisor's kernel shows the step no cgroup files)."""
    with client(service, "mallory") as mallory, ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            build, mallory, {"Dockerfile": "FROM python:3.13-slim\nRUN sleep 8\n"}
        )
        quotas: list[str] = []
        deadline = time.monotonic() + 60
        while not quotas and not running.done() and time.monotonic() < deadline:
            quotas = [q.read_text().strip() for q in CPU_BUILD_CGROUPS.glob("*/*/cpu.cfs_quota_us")]
            time.sleep(0.2)
        assert running.result().status_code == 200, running.result().text
    assert quotas == ["50000"], quotas


def test_a_build_step_runs_in_gvisor_and_nothing_else_does(
    service: Service, docker_client: docker.DockerClient
) -> None:
    """A RUN step is root only in gVisor's kernel (its kernel log is gVisor's, and it has
    no CAP_NET_RAW), whatever the Dockerfile says; a container the engine starts without a
    runtime outside a build still runs under runc."""
    probe = (
        "FROM python:3.13-slim\nUSER root\n"
        "RUN dmesg | head -1 | grep 'Starting gVisor' && "
        "! grep -q 'CapEff:.*a80425fb' /proc/self/status\n"
    )
    with client(service, "mallory") as mallory:
        built = build(mallory, {"Dockerfile": probe})
    assert built.status_code == 200, built.text
    kernel = docker_client.containers.run(
        built.json()["image"], ["cat", "/proc/version"], remove=True
    )
    assert b"gVisor" not in kernel and not kernel.startswith(b"Linux version 4.4.0"), kernel


def test_a_build_step_has_no_network_and_a_memory_limit(service: Service) -> None:
    """A RUN step sees only a loopback interface, and one allocating past build_memory_mb
    is killed (the build fails as the tenant's, the service goes on)."""
    interfaces = (
        "FROM python:3.13-slim\n"
        'RUN cat /proc/net/dev; test "$(awk -F: \'NR>2 {gsub(/ /, "", $1); print $1}\' '
        '/proc/net/dev)" = lo\n'
    )
    hog = "FROM python:3.13-slim\nRUN python3 -c 'b = bytearray(900 << 20); print(len(b))'\n"
    with client(service, "mallory") as mallory:
        offline = build(mallory, {"Dockerfile": interfaces})
        assert offline.status_code == 200, offline.text
        killed = build(mallory, {"Dockerfile": hog})
        assert killed.status_code == 422, killed.text
        assert "build_memory_mb=512" in killed.text and "943718400" not in killed.text
        assert mallory.get("/v1/pool").status_code == 200


def test_a_tenant_holds_at_most_max_environments(tmp_path_factory: pytest.TempPathFactory) -> None:
    """max_environments: 1: a second environment is refused (429 naming it) until the first
    is deleted; a delete answers another tenant 404 and leaves its use alone; the last
    tenant's delete removes the image."""
    state = tmp_path_factory.mktemp("quota")
    keys = state / "keys.yaml"
    entries = [
        {"tenant": t, "key_sha256": hash_key(k), "max_environments": 1} for t, k in KEYS.items()
    ]
    keys.write_text(yaml.safe_dump({"keys": entries}))
    first = {"Dockerfile": "FROM python:3.13-slim\nRUN echo first > /first\n"}
    second = {"Dockerfile": "FROM python:3.13-slim\nRUN echo second > /second\n"}
    with (
        environments_service(state, CONFIG, "--keys", str(keys)) as svc,
        client(svc, "mallory") as mallory,
        client(svc, "alice") as alice,
    ):
        built = build(mallory, first)
        assert built.status_code == 200, built.text
        one = built.json()["environment"]
        refused = build(mallory, second)
        assert refused.status_code == 429, refused.text
        assert "max_environments is 1" in refused.json()["message"], refused.text
        assert "DELETE /v1/environments/" in refused.json()["message"], refused.text
        assert build(mallory, first).status_code == 200  # the one it holds: found, no quota
        assert alice.delete(f"/v1/environments/{one}").status_code == 404
        assert mallory.get(f"/v1/environments/{one}").status_code == 200
        assert mallory.delete(f"/v1/environments/{one}").status_code == 204
        assert mallory.get(f"/v1/environments/{one}").status_code == 404
        engine = docker.from_env()
        try:
            with pytest.raises(docker.errors.ImageNotFound):
                engine.images.get(built.json()["image"])
        finally:
            engine.close()
        assert build(mallory, second).status_code == 200


def test_what_a_build_leaves_untagged_is_removed(
    service: Service, docker_client: docker.DockerClient
) -> None:
    """A failed build's steps and a multi-stage build's earlier stage leave untagged images
    that no environment holds and the disk budget never counted: each is removed once the
    build ends (no dangling image is left that was not there before)."""

    def dangling() -> set[str]:
        return {image["Id"] for image in docker_client.api.images(filters={"dangling": True})}

    before = dangling()
    failing = (
        "FROM python:3.13-slim\nRUN head -c 2000000 /dev/urandom > /a\n"
        f"RUN echo {secrets.token_hex(4)} > /b\nRUN exit 3\n"
    )
    staged = (
        "FROM python:3.13-slim AS stage\n"
        f"RUN head -c 2000000 /dev/urandom > /big && echo {secrets.token_hex(4)}\n"
        "FROM python:3.13-slim\nCOPY --from=stage /etc/hostname /copied\n"
    )
    with client(service, "mallory") as mallory:
        failed = build(mallory, {"Dockerfile": failing})
        assert failed.status_code == 422 and "returned a non-zero code: 3" in failed.text
        assert build(mallory, {"Dockerfile": staged}).status_code == 200
    assert dangling() <= before, dangling() - before


def test_the_platforms_layer_cannot_be_planted_or_copied(
    service: Service, docker_client: docker.DockerClient
) -> None:
    """A context holding the Dockerfile name the platform builds with is refused; a
    .dockerignore that tries to let COPY see that Dockerfile does not, and the runner's
    files never pass through the task's context (a COPY of it all holds only the task's)."""
    with client(service, "mallory") as mallory:
        planted = {
            "Dockerfile": "FROM python:3.13-slim\n",
            ".sandbox-layer.Dockerfile": "FROM python:3.13-slim\nRUN echo planted\n",
        }
        refused = build(mallory, planted)
        assert refused.status_code == 422, refused.text
        assert ".sandbox-layer.Dockerfile, a name the platform uses" in refused.text
        peek = {
            "Dockerfile": "FROM python:3.13-slim\nCOPY . /ctx/\n",
            ".dockerignore": "!.sandbox-layer.Dockerfile\n!.dockerignore\n",
            "mine.txt": "mine\n",
        }
        built = build(mallory, peek)
    assert built.status_code == 200, built.text
    listing = docker_client.containers.run(built.json()["image"], ["ls", "-A", "/ctx"], remove=True)
    assert listing.decode().split() == [".dockerignore", "Dockerfile", "mine.txt"], listing
