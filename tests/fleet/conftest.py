"""A real Ray cluster of three nodes on this machine, each a sandbox host, and a fleet service.

Every node offers ``sandbox_host`` and listens on loopback only; the host agents
all drive this machine's Docker engine (each labels and reaps only its own
containers). One cluster serves the whole fleet suite; pools are small (warm 1).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Service

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

NODE = {"num_cpus": 1, "resources": {"sandbox_host": 1}, "node_ip_address": "127.0.0.1"}
HOSTS = 3
POLICY = "pool: {warm: 1, max: 2}\n"

KEYS = {"trainer": "key-trainer-0123456789", "alice": "key-alice-0123456789"}
KEYS |= {"light": "key-light-0123456789", "heavy": "key-heavy-0123456789"}
KEYS |= {"starter": "key-starter-0123456789"}
FLEET_CONFIG = """
autoscale: {queue_threshold: 20, sustain_s: 1.0, cooldown_s: 600.0}
placement: {affinity_margin: 1.0}  # 2-slot hosts: a beat taken mid-run shows a run and its wait
warm: {rate_window_s: 2.0, idle_after_s: 4.0, initial_start_s: 0.5, margin: 1, min_per_group: 1}
tenants:
  light: {weight: 1, default_class: training}
  heavy: {weight: 3, default_class: training}
  trainer: {default_class: training, max_class: evaluation}
  starter: {max_starts_in_flight: 1}
"""


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "include_dashboard": False},
    )
    for _ in range(HOSTS - 1):
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="session")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Policies (default: warm 1, max 2), API keys and the fleet config the fleet tests share."""
    from sandbox.service.tenants import hash_key

    root = tmp_path_factory.mktemp("fleet")
    (root / "policies").mkdir()
    (root / "policies" / "default.yaml").write_text(POLICY)
    keys = [
        f"  - {{tenant: {name}, key_sha256: {hash_key(key)}, admin: {str(name == 'alice').lower()},"
        " max_concurrency: 1000, rate_per_s: 100000}"
        for name, key in KEYS.items()
    ]
    (root / "keys.yaml").write_text("keys:\n" + "\n".join(keys) + "\n")
    (root / "fleet.yaml").write_text(FLEET_CONFIG)
    return root


def fleet_service(cluster: Any, root: Path, *args: str) -> Service:
    """``sandbox serve --fleet auto`` on ``cluster`` with the shared policies and keys."""
    env = {"RAY_ADDRESS": cluster.address, "SANDBOX_STATE_DIR": str(root / "state")}
    return Service(
        "--fleet",
        "auto",
        "--keys",
        str(root / "keys.yaml"),
        "--fleet-config",
        str(root / "fleet.yaml"),
        *args,
        policies=root / "policies",
        log_dir=root,
        env=env,
    )


@pytest.fixture(scope="session")
def fleet(cluster: Any, fleet_dir: Path) -> Iterator[Service]:
    svc = fleet_service(cluster, fleet_dir)
    try:
        svc.wait_ready(timeout=300)
        yield svc
    finally:
        svc.stop()


def client(service: Service, tenant: str = "alice", timeout: float = 120) -> httpx.Client:
    return httpx.Client(
        base_url=service.url,
        timeout=timeout,
        headers={"Authorization": f"Bearer {KEYS[tenant]}"},
    )
