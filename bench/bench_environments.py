"""Per-task environments: the time to build one and to start a session in it, cold and cached.

A task environment like a Terminal-Bench task's (a Dockerfile with a few RUN and COPY
steps and a WORKDIR with files) is uploaded to ``POST /v1/environments`` of a service
this script starts, three times with a fresh nonce (a cold build) and again unchanged
(found cached); then a session is started in it with the pool cold (the first use
creates the container) and again once the pool has warmed. Two bases: ``FROM
ubuntu:24.04`` (aliased to the python-less debootstrap base, so the runner layer
installs python3 from Debian's archive) and ``FROM python:3.13-slim`` (aliased to
sandbox-python). Each is measured under three settings of the build steps, each with a
service of its own, in one run: ``runc-bridge`` (runc and the engine's bridge: the
unconfined baseline, what builds were before they were confined), ``gvisor-bridge``
(gVisor's kernel, the same network: what gVisor alone costs) and ``gvisor-allowlist``
(the confined default for steps that need a network: gVisor, an internal network per
build, the egress proxy letting through only Debian's archive).
Medians and the confined/baseline ratio of the cold build are printed; raw figures go
to bench/results/.

    .venv/bin/python bench/bench_environments.py
"""

from __future__ import annotations

import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save_results
from sandbox.client import SandboxClient
from sandbox.host.launcher import ServiceProcess

ROUNDS = 3
# The ubuntu base lacks python3: its runner layer apt-gets it from Debian's archive.
ALIASES = 'image_aliases:\n  "ubuntu:24.04": sandbox-base\n  "python:3.13-slim": sandbox-python\n'
ALLOW_DEBIAN = (
    "build_network: allowlist\nbuild_allow:\n  - host: deb.debian.org\n    ports: [80]\n"
    "  - cidr: 203.0.113.0/24\n    ports: [80]\n"
)
CONFIGS = {
    "runc-bridge": ALIASES + "build_runtime: engine\nbuild_network: bridge\n",
    "gvisor-bridge": ALIASES + "build_network: bridge\n",
    # This machine's resolver answers deb.debian.org with a TEST-NET-3 address (its egress
    # is intercepted); the proxy refuses such special addresses unless a cidr rule names them.
    "gvisor-allowlist": ALIASES + ALLOW_DEBIAN,
}
BASELINE = "runc-bridge"
BASES = ("ubuntu:24.04", "python:3.13-slim")


def task_folder(root: Path, base: str) -> Path:
    folder = root / f"task-{secrets.token_hex(4)}"
    (folder / "app").mkdir(parents=True)
    (folder / "app" / "main.py").write_text("print('hello')\n" * 50)
    (folder / "Dockerfile").write_text(
        f"FROM {base}\n"
        f"RUN echo {secrets.token_hex(8)} > /etc/task-nonce\n"
        "RUN mkdir -p /opt/data && seq 1 100000 > /opt/data/numbers.txt\n"
        "COPY app/ /app/\n"
        "WORKDIR /app\n"
    )
    return folder


def timed_session(client: SandboxClient, environment: str) -> float:
    started = time.monotonic()
    info = client.create_session(environment=environment)
    result = client.session_exec(info.id, "wc -l < /opt/data/numbers.txt")
    elapsed = time.monotonic() - started
    assert result.stdout.strip() == "100000", result
    client.close_session(info.id)
    return elapsed


def measure(client: SandboxClient, root: Path, base: str) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {k: [] for k in ("cold", "cached", "first", "warm")}
    for _ in range(ROUNDS):
        folder = task_folder(root, base)
        started = time.monotonic()
        built = client.build_environment(folder)
        figures["cold"].append(time.monotonic() - started)
        assert not built["cached"], built
        started = time.monotonic()
        again = client.build_environment(folder)
        figures["cached"].append(time.monotonic() - started)
        assert again["cached"], again
        figures["first"].append(timed_session(client, built["environment"]))
        time.sleep(3)  # the pool warms a sandbox of the environment after its first use
        figures["warm"].append(timed_session(client, built["environment"]))
    return figures


def measure_config(name: str, config: str) -> dict[str, dict[str, list[float]]]:
    """Every base's figures under one environments config, with a service of its own."""
    with tempfile.TemporaryDirectory(prefix=f"bench-envs-{name}-") as tmp:
        root = Path(tmp)
        (root / "environments.yaml").write_text(config)
        service = ServiceProcess(
            log_dir=root,
            env={
                "SANDBOX_STATE_DIR": str(root / "state"),
                "SANDBOX_ENVIRONMENTS_CONFIG": str(root / "environments.yaml"),
            },
        )
        try:
            service.wait_ready()
            with SandboxClient(service.url, timeout=600) as client:
                return {base: measure(client, root, base) for base in BASES}
        finally:
            service.stop()
            engine = docker.from_env()
            for record in (root / "state" / "environments").glob("*.json"):
                engine.images.remove(f"sandbox-env:{record.stem}", force=True)
            engine.close()


def main() -> int:
    results = {name: measure_config(name, config) for name, config in CONFIGS.items()}
    print("| FROM | build steps | cold build s | cached build s | first session s | warm s |")
    print("|---|---|---|---|---|---|")
    for base in BASES:
        for name in CONFIGS:
            figures = results[name][base]
            keys = ("cold", "cached", "first", "warm")
            row = [f"{statistics.median(figures[k]):.2f}" for k in keys]
            print(f"| {base} | {name} | " + " | ".join(row) + " |")
    for base in BASES:
        baseline = statistics.median(results[BASELINE][base]["cold"])
        for name in CONFIGS:
            if name != BASELINE:
                ratio = statistics.median(results[name][base]["cold"]) / baseline
                print(f"{base}: {name} cold build / {BASELINE} = {ratio:.2f}x")
    save_results("environments", {"rounds": ROUNDS, "seconds": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
