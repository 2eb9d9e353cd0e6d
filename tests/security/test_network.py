"""Network allowlists, attacked from inside real sandboxes.

Everything here stays on this machine: the test builds an *internal* egress
network (nothing on it can leave the host), puts a small HTTP/UDP test host on
it under several names, and gives the backend's egress proxy that network as
its way out. Sandboxes sit on their own internal networks, with the proxy as
the only other endpoint. Each attack asserts the specific safe outcome: a
``403`` with the reason, a failed connection, a DNS refusal, nothing received.

The test host necessarily lives on a private (Docker) address; the proxy
refuses private addresses unless a ``cidr`` rule names them, so policies that
want it reachable list the test network's subnet, and other tests show that
without that rule the same host is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import psutil
import pytest

from sandbox.backends.docker import (
    LABEL_MANAGED,
    LABEL_OWNER,
    DockerBackend,
    DockerSandbox,
    container_settings,
)
from sandbox.backends.network import (
    DNS_PORT,
    LABEL_ROLE,
    PROXY_PORT,
    ROLE_PROXY,
    SandboxNetwork,
)
from sandbox.core.execution import BASE_ENV, exec_limits
from sandbox.core.pool import Pool
from sandbox.environments import EnvironmentBuilder, EnvironmentSpec
from sandbox.environments.config import EnvironmentsConfig
from sandbox.policy import AllowRule, Policy
from sandbox.results import ExecResult, ExecStatus
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

LABEL_TEST = "sandbox-platform.test"
NAMES = ("allowed.example.test", "sub.allowed.example.test", "other.example.test")
PRIVATE_NAME = "private.example.test"
WEB_PORTS = (80, 8080)
UDP_PORT = 9999
METADATA = "169.254.169.254"
METADATA_SPELLINGS = (
    "169.254.169.254",
    "2852039166",
    "0xa9fea9fe",
    "0xA9.0xFE.0xA9.0xFE",
    "0251.0376.0251.0376",
    "169.254.43518",
    "169.16689662",
    "169.254.169.254.",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
)

# The test host: HTTP on 80 and 8080 (answers with what it saw), a UDP counter on
# UDP_PORT, and /stats (every peer that reached HTTP, every datagram's sender).
WEB_SERVER = r"""
import http.server, json, socket, threading
peers, datagrams = [], []

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def _reply(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/stats":
            return self._reply({"peers": peers, "datagrams": datagrams})
        peers.append(self.client_address[0])
        self._reply({"host": self.headers.get("Host"), "path": self.path,
                     "port": self.server.server_address[1], "peer": self.client_address[0]})

    def do_POST(self):
        peers.append(self.client_address[0])
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._reply({"received": body.decode(), "host": self.headers.get("Host")})

    def log_message(self, *args):
        pass

def udp():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", UDP_PORT))
    while True:
        data, addr = sock.recvfrom(4096)
        datagrams.append(addr[0])

threading.Thread(target=udp, daemon=True).start()
servers = [http.server.ThreadingHTTPServer(("0.0.0.0", p), Handler) for p in WEB_PORTS]
for server in servers[1:]:
    threading.Thread(target=server.serve_forever, daemon=True).start()
servers[0].serve_forever()
""".replace("UDP_PORT", str(UDP_PORT)).replace("WEB_PORTS", repr(WEB_PORTS))

# Prepended to the code run in sandboxes: raw proxy requests, so that status codes
# and reasons are seen exactly as the proxy sent them.
CLIENT = r"""
import json, os, socket, sys, threading, time
PROXY_HOST, PROXY_PORT = os.environ["HTTP_PROXY"][len("http://"):].rsplit(":", 1)
PROXY_PORT = int(PROXY_PORT)

def _read_all(sock):
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk

def _status(data):
    try:
        return int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0

def proxy_raw(request):
    with socket.create_connection((PROXY_HOST, PROXY_PORT), timeout=15) as sock:
        sock.sendall(request.encode("latin-1"))
        data = _read_all(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    return {"status": _status(head), "body": body.decode("latin-1")}

def get(url, host=None, extra=""):
    host_line = "" if host is False else f"Host: {host or url.split('/')[2]}\r\n"
    return proxy_raw(f"GET {url} HTTP/1.1\r\n{host_line}{extra}Connection: close\r\n\r\n")

def tunnel(target, path="/"):
    with socket.create_connection((PROXY_HOST, PROXY_PORT), timeout=15) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(1)
            if not chunk:
                break
            head += chunk
        status = _status(head)
        if status != 200:
            return {"status": status, "body": _read_all(sock).decode("latin-1")}
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n".encode())
        data = _read_all(sock)
    _, _, body = data.partition(b"\r\n\r\n")
    return {"status": status, "inner": _status(data), "body": body.decode("latin-1")}

def attempt(fn, *args):
    try:
        return {"ok": True, "value": fn(*args)}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__, "detail": str(exc)}

def connect(address, port, timeout=2.0):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    target = (address, port)
    if address.startswith("fe80:"):  # link-local: through our own interface
        target = (address, port, 0, socket.if_nametoindex("eth0"))
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(target)
        return "connected"
    finally:
        sock.close()

def in_parallel(fn, items):
    results = {}
    def run(item):
        results[repr(item)] = attempt(fn, *item)
    threads = [threading.Thread(target=run, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results

def report(value):
    print(json.dumps(value))
"""


@dataclass(frozen=True)
class EgressNet:
    name: str
    subnet: str
    gateway: str


@dataclass(frozen=True)
class Web:
    ip: str
    container_id: str

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{self.ip}:8080/stats", timeout=10) as response:
            stats: dict[str, Any] = json.load(response)
        return stats


def _policy(name: str, *rules: dict[str, Any], runtime: str = "runc") -> Policy:
    base = make_policy(
        f"net-{name}",
        runtime=runtime,
        resources={"wall_time_s": 20.0, "cpu_time_s": 10.0, "memory_mb": 256},
        pool={"warm": 0, "max": 2},
    )
    # Built in Python, not from YAML: see test_allowlist_policy_loads_from_yaml.
    allow = tuple({**rule, "ports": tuple(rule["ports"])} for rule in rules)
    data = base.model_dump()
    data["network"] = {"mode": "allowlist", "allow": allow}
    return Policy.model_validate(data)


def test_allowlist_policy_loads_from_yaml() -> None:
    policy = make_policy(
        "net-yaml",
        network={"mode": "allowlist", "allow": [{"host": "example.com", "ports": [443]}]},
    )
    assert policy.network.allow[0].ports == (443,)


def _host(name: str, *ports: int) -> dict[str, Any]:
    return {"host": name, "ports": list(ports or WEB_PORTS)}


def _cidr(cidr: str, *ports: int) -> dict[str, Any]:
    return {"cidr": cidr, "ports": list(ports or WEB_PORTS)}


async def _run(
    sandbox: DockerSandbox | Any, policy: Policy, code: str, env: dict[str, str] | None = None
) -> ExecResult:
    return await sandbox.exec(
        ["python3", "main.py"],
        limits=exec_limits(policy, None),
        env={**BASE_ENV, **(env or {})},
        files={"main.py": (CLIENT + code).encode()},
    )


async def run_in(pool: Pool, image: str, policy: Policy, code: str, tenant: str = "net") -> Any:
    """Run ``CLIENT + code`` in a sandbox of ``policy``; returns what it ``report()``-ed."""
    async with pool.lease(image, policy, tenant) as lease:
        result = await _run(lease.sandbox, policy, code)
    return _reported(result)


def _reported(result: ExecResult) -> Any:
    assert result.status == ExecStatus.OK, (result.status, result.stderr.decode()[-3000:])
    return json.loads(result.stdout.decode().strip().splitlines()[-1])


def _refused(answer: dict[str, Any], *words: str) -> None:
    assert answer["status"] == 403, answer
    for word in words:
        assert word in answer["body"], (word, answer)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def testnet(docker_client: docker.DockerClient) -> Iterator[EgressNet]:
    """An internal bridge: the test's stand-in for the internet, unable to leave the host."""
    name = f"sandbox-test-egress-{secrets.token_hex(4)}"
    network = docker_client.networks.create(
        name, driver="bridge", internal=True, labels={LABEL_TEST: "1"}
    )
    try:
        network.reload()
        (config,) = network.attrs["IPAM"]["Config"]
        yield EgressNet(name, config["Subnet"], config["Gateway"])
    finally:
        with contextlib.suppress(docker.errors.APIError):
            network.remove()


@pytest.fixture(scope="module")
def web(docker_client: docker.DockerClient, testnet: EgressNet, python_image: str) -> Iterator[Web]:
    """The test host, reachable on the test network as every name in NAMES and PRIVATE_NAME."""
    api = docker_client.api
    created = api.create_container(
        python_image,
        command=["python3", "-c", WEB_SERVER],
        labels={LABEL_TEST: "1"},
        host_config=api.create_host_config(
            network_mode=testnet.name, auto_remove=True, mem_limit=128 << 20
        ),
        networking_config=api.create_networking_config(
            {testnet.name: api.create_endpoint_config(aliases=[*NAMES, PRIVATE_NAME])}
        ),
    )
    container_id = created["Id"]
    try:
        api.start(container_id)
        info = api.inspect_container(container_id)
        ip = info["NetworkSettings"]["Networks"][testnet.name]["IPAddress"]
        host = Web(ip, container_id)
        deadline = time.monotonic() + 20
        while True:
            try:
                host.stats()
                break
            except OSError:
                assert time.monotonic() < deadline, "the test host never answered"
                time.sleep(0.1)
        yield host
    finally:
        with contextlib.suppress(docker.errors.APIError):
            api.remove_container(container_id, force=True)


@contextlib.contextmanager
def _owner_holder() -> Iterator[str]:
    """An owner label of our own, kept 'alive' by a helper process (see test_pool)."""
    holder = subprocess.Popen(["sleep", "600"])
    try:
        started = psutil.Process(holder.pid).create_time()
        yield f"{socket.gethostname()}:{holder.pid}:{started:.3f}"
    finally:
        holder.kill()
        holder.wait()


@contextlib.asynccontextmanager
async def _pool(testnet: EgressNet) -> AsyncIterator[Pool]:
    with _owner_holder() as owner:
        backend = DockerBackend(egress_network=testnet.name)
        backend.owner = owner
        pool = Pool(backend, health_interval_s=1.0)
        await pool.start()
        try:
            yield pool
        finally:
            await pool.close()


@pytest.fixture(scope="module")
async def net_pool(testnet: EgressNet, web: Web) -> AsyncIterator[Pool]:
    async with _pool(testnet) as pool:
        yield pool


def _ours(client: docker.DockerClient, owner: str) -> tuple[list[str], list[str]]:
    label = f"{LABEL_OWNER}={owner}"
    containers = client.api.containers(all=True, filters={"label": label})
    networks = client.api.networks(filters={"label": label})
    return [c["Id"][:12] for c in containers], [n["Name"] for n in networks]


# --------------------------------------------------------------------------- reachability


async def test_allowed_host_is_reachable_through_the_proxy(
    net_pool: Pool, python_image: str, testnet: EgressNet, web: Web
) -> None:
    policy = _policy("allowed", _host("allowed.example.test"), _cidr(testnet.subnet))
    code = """
import urllib.request
names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY")
env = {k: os.environ.get(k) for k in names}
HEAD = "HTTP/1.1\\r\\nHost: allowed.example.test:8080\\r\\n"
CHUNKS = "3\\r\\nabc\\r\\n2\\r\\nde\\r\\n0\\r\\n\\r\\n"
with urllib.request.urlopen("http://allowed.example.test:8080/via-urllib", timeout=10) as r:
    via_urllib = json.load(r)
report({
    "env": env,
    "urllib": via_urllib,
    "get": get("http://allowed.example.test/plain"),
    "get_case": get("http://ALLOWED.Example.TEST.:8080/case"),
    "no_host_header": get("http://allowed.example.test:8080/nohost", host=False),
    "tunnel": tunnel("allowed.example.test:8080", "/tunnelled"),
    "post": proxy_raw(
        "POST http://allowed.example.test:8080/p " + HEAD + "Content-Length: 5\\r\\n\\r\\nhello"
    ),
    "chunked": proxy_raw(
        "POST http://allowed.example.test:8080/c " + HEAD
        + "Transfer-Encoding: chunked\\r\\n\\r\\n" + CHUNKS
    ),
})
"""
    out = await run_in(net_pool, python_image, policy, code)
    proxy_url = out["env"]["HTTP_PROXY"]
    assert proxy_url.startswith("http://") and proxy_url.endswith(f":{PROXY_PORT}")
    assert out["env"] == {
        "HTTP_PROXY": proxy_url,
        "HTTPS_PROXY": proxy_url,
        "http_proxy": proxy_url,
        "https_proxy": proxy_url,
        "NO_PROXY": "",
    }
    assert out["urllib"]["path"] == "/via-urllib"
    assert out["urllib"]["host"] == "allowed.example.test:8080"
    for key, port, path in (
        ("get", 80, "/plain"),
        ("get_case", 8080, "/case"),
        ("no_host_header", 8080, "/nohost"),
    ):
        assert out[key]["status"] == 200, out[key]
        seen = json.loads(out[key]["body"])
        assert (seen["port"], seen["path"]) == (port, path)
    assert out["tunnel"]["status"] == 200 and out["tunnel"]["inner"] == 200, out["tunnel"]
    assert json.loads(out["tunnel"]["body"])["path"] == "/tunnelled"
    assert json.loads(out["post"]["body"])["received"] == "hello"
    assert json.loads(out["chunked"]["body"])["received"] == "abcde"
    # Every request reached the test host from the proxy, never from the sandbox.
    peers = set(web.stats()["peers"])
    assert peers and not any(peer.startswith("198.18.") for peer in peers)


async def test_forbidden_host_is_refused(
    net_pool: Pool, python_image: str, testnet: EgressNet
) -> None:
    policy = _policy("forbidden", _host("allowed.example.test"), _cidr(testnet.subnet))
    code = """
report({
    "get": get("http://other.example.test:8080/"),
    "tunnel": tunnel("other.example.test:8080"),
    "unlisted": tunnel("example.com:443"),
    "https_uri": get("https://allowed.example.test/"),
    "userinfo": get("http://allowed.example.test@other.example.test:8080/"),
    "origin_form": proxy_raw("GET / HTTP/1.1\\r\\nHost: allowed.example.test\\r\\n\\r\\n"),
})
"""
    out = await run_in(net_pool, python_image, policy, code)
    _refused(out["get"], "other.example.test", "not in the allowlist")
    _refused(out["tunnel"], "other.example.test", "not in the allowlist")
    _refused(out["unlisted"], "example.com", "not in the allowlist")
    for key in ("https_uri", "userinfo", "origin_form"):
        assert out[key]["status"] == 400, out[key]


async def test_domain_rules_exact_and_subdomains(
    net_pool: Pool, python_image: str, testnet: EgressNet
) -> None:
    code = """
report({name: tunnel(name + ":8080")["status"] for name in
        ("allowed.example.test", "sub.allowed.example.test", "other.example.test")})
"""
    wildcard = _policy(
        "wildcard", {"domain": "*.allowed.example.test", "ports": [8080]}, _cidr(testnet.subnet)
    )
    exact = _policy(
        "exact", {"domain": "allowed.example.test", "ports": [8080]}, _cidr(testnet.subnet)
    )
    assert await run_in(net_pool, python_image, wildcard, code) == {
        "allowed.example.test": 403,
        "sub.allowed.example.test": 200,
        "other.example.test": 403,
    }
    assert await run_in(net_pool, python_image, exact, code) == {
        "allowed.example.test": 200,
        "sub.allowed.example.test": 403,
        "other.example.test": 403,
    }


async def test_port_rules(net_pool: Pool, python_image: str, testnet: EgressNet) -> None:
    policy = _policy("ports", _host("allowed.example.test", 8080), _cidr(testnet.subnet, 80, 8080))
    code = """
report({"8080": tunnel("allowed.example.test:8080"), "80": tunnel("allowed.example.test:80"),
        "get80": get("http://allowed.example.test/")})
"""
    out = await run_in(net_pool, python_image, policy, code)
    assert out["8080"]["status"] == 200
    _refused(out["80"], "port 80")
    _refused(out["get80"], "port 80")


# --------------------------------------------------------------------------- addresses


async def test_allowed_name_with_a_private_address_needs_a_cidr_rule(
    net_pool: Pool, python_image: str, web: Web
) -> None:
    code = """
report({"allowed": tunnel("allowed.example.test:8080"),
        "private": tunnel("private.example.test:8080")})
"""
    no_cidr = _policy("no-cidr", _host("allowed.example.test"), _host(PRIVATE_NAME))
    # A catch-all cidr names nothing special: private space must be listed itself.
    catch_all = _policy(
        "catch-all", _host("allowed.example.test"), _host(PRIVATE_NAME), _cidr("0.0.0.0/0")
    )
    for policy in (no_cidr, catch_all):
        out = await run_in(net_pool, python_image, policy, code)
        _refused(out["allowed"], "resolves to no allowed address", web.ip, "private")
        _refused(out["private"], "resolves to no allowed address", web.ip, "private")


async def test_raw_ip_needs_a_cidr_rule(
    net_pool: Pool, python_image: str, testnet: EgressNet, web: Web
) -> None:
    decimal = str(int.from_bytes(socket.inet_aton(web.ip), "big"))
    code = f"""
report({{"tunnel": tunnel("{web.ip}:8080"), "get": get("http://{web.ip}:8080/raw"),
        "decimal": tunnel("{decimal}:8080")}})
"""
    names_only = _policy("raw-names", _host("allowed.example.test"))
    out = await run_in(net_pool, python_image, names_only, code)
    for key in ("tunnel", "get", "decimal"):
        _refused(out[key], "raw address", web.ip, "no cidr rule")
    with_cidr = _policy("raw-cidr", _host("allowed.example.test"), _cidr(testnet.subnet))
    out = await run_in(net_pool, python_image, with_cidr, code)
    for key in ("tunnel", "get", "decimal"):
        assert out[key]["status"] == 200, out[key]


async def test_metadata_and_loopback_refused_in_every_spelling(
    net_pool: Pool, python_image: str, testnet: EgressNet
) -> None:
    # Even a catch-all cidr rule on the port does not name link-local or loopback.
    policy = _policy("metadata", _cidr("0.0.0.0/0", 80), _cidr("::/0", 80), _cidr(testnet.subnet))
    code = f"""
spellings = {list(METADATA_SPELLINGS)!r}
report({{
    "tunnel": {{s: tunnel(s + ":80") for s in spellings}},
    "get": {{s: get("http://" + s + "/latest/meta-data/") for s in spellings}},
    "loopback": {{s: tunnel(s + ":80") for s in ("127.0.0.1", "127.1", "0x7f.1", "2130706433",
                                                 "[::1]", "0.0.0.0", "[::]", "localhost")}},
    "gateway": tunnel("{testnet.gateway}:80"),
    "zone": tunnel("[fe80::1%25eth0]:80"),
}})
"""
    out = await run_in(net_pool, python_image, policy, code)
    for kind in ("tunnel", "get"):
        assert set(out[kind]) == set(METADATA_SPELLINGS)
        for spelling, answer in out[kind].items():
            _refused(answer, METADATA, "cloud metadata")
            assert spelling  # every spelling became the same address, refused for what it is
    for spelling, answer in out["loopback"].items():
        assert answer["status"] == 403, (spelling, answer)
    _refused(out["loopback"]["127.0.0.1"], "loopback")
    _refused(out["loopback"]["0x7f.1"], "127.0.0.1", "loopback")
    _refused(out["loopback"]["[::1]"], "loopback")
    _refused(out["loopback"]["localhost"], "not in the allowlist")
    _refused(out["gateway"], testnet.gateway, "gateway")
    assert out["zone"]["status"] in (400, 403)


async def test_host_header_must_match_the_uri(
    net_pool: Pool, python_image: str, testnet: EgressNet
) -> None:
    policy = _policy(
        "host-header",
        _host("allowed.example.test"),
        _host("other.example.test"),
        _cidr(testnet.subnet),
    )
    code = """
url = "http://allowed.example.test:8080/"
report({
    "mismatch": get(url, host="other.example.test:8080"),
    "other_port": get(url, host="allowed.example.test:80"),
    "two": get(url, host="allowed.example.test:8080", extra="Host: other.example.test:8080\\r\\n"),
    "match": get(url, host="Allowed.Example.Test.:8080"),
})
"""
    out = await run_in(net_pool, python_image, policy, code)
    _refused(out["mismatch"], "Host header")
    _refused(out["other_port"], "Host header")
    _refused(out["two"], "more than one Host header")
    assert out["match"]["status"] == 200


# --------------------------------------------------------------------------- bypasses


async def test_direct_tcp_and_udp_do_not_get_out(
    net_pool: Pool, python_image: str, testnet: EgressNet, web: Web
) -> None:
    policy = _policy("direct", _host("allowed.example.test"), _cidr(testnet.subnet))
    code = f"""
tcp = in_parallel(connect, [("{web.ip}", 80), ("{web.ip}", 8080), ("{testnet.gateway}", 8080)])
udp = []
for _ in range(5):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.append(attempt(sock.sendto, b"leak", ("{web.ip}", {UDP_PORT})))
    sock.close()
    time.sleep(0.05)
# The proxy's only open ports are its own; nothing else on it listens.
proxy_other = attempt(connect, PROXY_HOST, 22)
report({{"tcp": tcp, "udp": udp, "proxy_other": proxy_other}})
"""
    before = web.stats()
    out = await run_in(net_pool, python_image, policy, code)
    for target, answer in out["tcp"].items():
        assert not answer["ok"], (target, answer)
    assert not out["proxy_other"]["ok"]
    await asyncio.sleep(0.5)
    after = web.stats()
    assert after["datagrams"] == before["datagrams"] == []
    assert after["peers"] == before["peers"]


async def test_dns_is_refused_inside_the_sandbox(
    net_pool: Pool, python_image: str, testnet: EgressNet
) -> None:
    policy = _policy("dns", _host("allowed.example.test"), _cidr(testnet.subnet))
    code = """
import struct
def query(name):
    header = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0"
    return header + labels + struct.pack(">HH", 1, 1)

def udp_ask(server, name):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(3)
    sock.sendto(query(name), (server, 53))
    data, _ = sock.recvfrom(4096)
    flags, qd, an = struct.unpack(">HHH", data[2:8])
    return {"id": struct.unpack(">H", data[:2])[0], "rcode": flags & 0xF, "answers": an}

def tcp_ask(server, name):
    q = query(name)
    with socket.create_connection((server, 53), timeout=3) as sock:
        sock.sendall(struct.pack(">H", len(q)) + q)
        data = sock.recv(4096)[2:]
    flags, qd, an = struct.unpack(">HHH", data[2:8])
    return {"rcode": flags & 0xF, "answers": an}

resolv = open("/etc/resolv.conf").read()
report({
    "getaddrinfo": {n: attempt(socket.getaddrinfo, n, 80) for n in
                    ("allowed.example.test", "other.example.test", "example.com")},
    "proxy_udp": attempt(udp_ask, PROXY_HOST, "allowed.example.test"),
    "proxy_tcp": attempt(tcp_ask, PROXY_HOST, "example.com"),
    "embedded": attempt(udp_ask, "127.0.0.11", "allowed.example.test"),
    "resolv": resolv,
})
"""
    out = await run_in(net_pool, python_image, policy, code)
    for name, answer in out["getaddrinfo"].items():
        assert not answer["ok"] and answer["error"] == "gaierror", (name, answer)
    assert out["proxy_udp"] == {"ok": True, "value": {"id": 0x1234, "rcode": 5, "answers": 0}}
    assert out["proxy_tcp"] == {"ok": True, "value": {"rcode": 5, "answers": 0}}
    # Docker's embedded resolver answers (the sandbox's resolv.conf names only it) but
    # resolves nothing outside the sandbox's own network.
    embedded = out["embedded"]
    assert not embedded["ok"] or embedded["value"]["answers"] == 0, embedded
    assert "nameserver 127.0.0.11" in out["resolv"]


async def test_the_host_is_unreachable(
    net_pool: Pool, python_image: str, testnet: EgressNet
) -> None:
    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    listener.bind(("::", 0))
    listener.listen(16)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    addresses = sorted(
        {
            entry.address.split("%", 1)[0]
            for entries in psutil.net_if_addrs().values()
            for entry in entries
            if entry.family in (socket.AF_INET, socket.AF_INET6)
        }
        - {"127.0.0.1", "::1"}
    )
    assert testnet.gateway in addresses
    # Rules that cover every address on that port: the host stays out all the same.
    policy = _policy(
        "host",
        _cidr("0.0.0.0/0", port),
        _cidr("::/0", port),
        _cidr(testnet.subnet, port),
        _cidr("172.16.0.0/12", port),
    )
    code = f"""
targets = [(a, {port}) for a in {addresses!r}]
report({{"direct": in_parallel(connect, targets),
        "proxied": {{a: tunnel(("[%s]" % a if ":" in a else a) + ":{port}")
                    for a in {addresses!r}}}}})
"""
    try:
        out = await run_in(net_pool, python_image, policy, code)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert len(out["direct"]) == len(addresses)
    for target, answer in out["direct"].items():
        assert not answer["ok"], (target, answer)
    for address, answer in out["proxied"].items():
        # The host's address or the gateway (the host); a bridge some other test made
        # since the sandbox started is still link-local.
        _refused(answer, address)
        assert "host" in answer["body"] or (
            address.startswith("fe80:") and "link-local" in answer["body"]
        ), answer


async def test_sibling_sandboxes_cannot_reach_each_other(
    net_pool: Pool, python_image: str, testnet: EgressNet
) -> None:
    # Even a cidr rule covering every sandbox network does not open the way.
    policy = _policy(
        "sibling",
        _host("allowed.example.test"),
        _cidr(testnet.subnet),
        _cidr("198.18.0.0/15", 7000),
    )
    listen = """
server = socket.socket()
server.bind(("0.0.0.0", 7000))
server.listen(8)
server.settimeout(4)
try:
    conn, peer = server.accept()
    report({"accepted": peer[0]})
except socket.timeout:
    report({"accepted": None})
"""
    async with (
        net_pool.lease(python_image, policy, "sibling-a") as a,
        net_pool.lease(python_image, policy, "sibling-b") as b,
    ):
        net_a, net_b = a.sandbox.network, b.sandbox.network
        assert isinstance(net_a, SandboxNetwork) and isinstance(net_b, SandboxNetwork)
        assert net_a.id != net_b.id and not net_a.subnet.overlaps(net_b.subnet)
        target = str(net_b.sandbox_ip)
        attack = f"""
time.sleep(0.5)
report({{"direct": attempt(connect, "{target}", 7000),
        "proxied": tunnel("{target}:7000"),
        "proxy_of_b": attempt(connect, "{net_b.proxy_ip}", {PROXY_PORT})}})
"""
        listened, attacked = await asyncio.gather(
            _run(b.sandbox, policy, listen), _run(a.sandbox, policy, attack)
        )
    assert _reported(listened) == {"accepted": None}
    out = _reported(attacked)
    assert not out["direct"]["ok"], out
    _refused(out["proxied"], target, "sandbox platform")
    assert not out["proxy_of_b"]["ok"], out


async def test_network_none_still_has_only_loopback(
    net_pool: Pool, python_image: str, docker_client: docker.DockerClient
) -> None:
    policy = make_policy("net-none", resources={"wall_time_s": 5.0})
    async with net_pool.lease(python_image, policy, "none") as lease:
        assert lease.sandbox.network is None
        info = docker_client.api.inspect_container(lease.sandbox.id)
        result = await lease.sandbox.exec(
            ["python3", "-c", "import socket; print([n for _, n in socket.if_nameindex()])"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
        )
    assert info["HostConfig"]["NetworkMode"] == "none"
    assert result.stdout.decode().strip() == "['lo']"


# --------------------------------------------------------------------------- the plumbing


async def test_settings_networks_and_proxy_are_locked_down(
    net_pool: Pool, python_image: str, testnet: EgressNet, docker_client: docker.DockerClient
) -> None:
    policy = _policy("settings", _host("allowed.example.test"))
    api = docker_client.api
    async with net_pool.lease(python_image, policy, "settings") as lease:
        network = lease.sandbox.network
        assert isinstance(network, SandboxNetwork)
        info = api.inspect_container(lease.sandbox.id)
        net_info = api.inspect_network(network.id)
    host = info["HostConfig"]
    assert host["NetworkMode"] == network.name
    assert host["Dns"] == [str(network.proxy_ip)]
    assert host["CapDrop"] == ["ALL"] and "NET_RAW" not in str(host["CapAdd"])
    assert host["Sysctls"]["net.ipv6.conf.all.disable_ipv6"] == "1"
    assert list(info["NetworkSettings"]["Networks"]) == [network.name]
    assert info["NetworkSettings"]["Networks"][network.name]["IPAddress"] == str(network.sandbox_ip)
    # The network: internal, no host address on it, labelled for cleanup, and the
    # proxy its only other endpoint.
    assert net_info["Internal"] is True
    assert net_info["Options"]["com.docker.network.bridge.inhibit_ipv4"] == "true"
    assert net_info["Labels"][LABEL_MANAGED] == "1"
    assert net_info["Labels"][LABEL_OWNER] == net_pool.backend.owner  # type: ignore[attr-defined]
    assert len(net_info["Containers"]) == 2
    bridge = f"br-{network.id[:12]}"
    bridge_addresses = psutil.net_if_addrs().get(bridge, [])
    assert not [a for a in bridge_addresses if a.family == socket.AF_INET], bridge_addresses
    # The proxy: one per backend, as locked down as the sandboxes allow.
    (proxy,) = api.containers(
        filters={"label": [f"{LABEL_OWNER}={net_pool.backend.owner}", f"{LABEL_ROLE}={ROLE_PROXY}"]}  # type: ignore[attr-defined]
    )
    proxy_info = api.inspect_container(proxy["Id"])
    proxy_host = proxy_info["HostConfig"]
    assert proxy_info["Config"]["User"] == "65534:65534"
    assert proxy_host["CapDrop"] == ["ALL"] and not proxy_host["CapAdd"]
    assert proxy_host["ReadonlyRootfs"] is True
    assert "no-new-privileges:true" in proxy_host["SecurityOpt"]
    assert proxy_host["Sysctls"]["net.ipv4.ip_forward"] == "0"
    assert proxy_host["NetworkMode"] == testnet.name
    assert not proxy_host.get("PortBindings")  # nothing published on the host
    # Pure settings: gVisor with an allowlist uses the runtime with a network stack.
    gvisor = _policy("settings-gvisor", _host("allowed.example.test"), runtime="runsc")
    settings = container_settings(python_image, gvisor, "owner", network)
    assert settings["host_config"]["runtime"] == "runsc-net"
    assert settings["environment"]["HTTPS_PROXY"] == network.proxy_url
    with pytest.raises(ValueError, match="allowlist"):
        container_settings(python_image, gvisor, "owner")
    assert DNS_PORT == 53


async def test_gvisor_allowlist_sandbox_uses_runsc_net(
    net_pool: Pool, python_image: str, testnet: EgressNet, docker_client: docker.DockerClient
) -> None:
    _require_gvisor_networking(docker_client, python_image, testnet)
    policy = _policy(
        "gvisor", _host("allowed.example.test"), _cidr(testnet.subnet), runtime="runsc"
    )
    code = """
report({"tunnel": tunnel("allowed.example.test:8080"), "other": tunnel("other.example.test:8080")})
"""
    async with net_pool.lease(python_image, policy, "gvisor") as lease:
        runtime = docker_client.api.inspect_container(lease.sandbox.id)["HostConfig"]["Runtime"]
        out = _reported(await _run(lease.sandbox, policy, code))
    assert runtime == "runsc-net"
    assert out["tunnel"]["status"] == 200
    _refused(out["other"], "not in the allowlist")


def _require_gvisor_networking(client: docker.DockerClient, image: str, testnet: EgressNet) -> None:
    """Skip when this machine's runsc cannot give a container a network at all."""
    try:
        client.containers.run(
            image, ["true"], runtime="runsc-net", network=testnet.name, remove=True
        )
    except docker.errors.APIError as exc:
        if "root network namespace" in str(exc):
            pytest.skip(
                "this runsc (gVisor 2022) mistakes every network namespace for the root one "
                "on this kernel (/proc/sys/net/core/rmem_default is per-namespace since 6.x): "
                "runsc-net cannot start any networked container here"
            )
        raise


async def test_cleanup_leaves_no_network_or_container(
    testnet: EgressNet, web: Web, python_image: str, docker_client: docker.DockerClient
) -> None:
    policy = _policy("cleanup", _host("allowed.example.test"), _cidr(testnet.subnet))
    code = 'report(tunnel("allowed.example.test:8080")["status"])'
    async with _pool(testnet) as pool:
        owner = pool.backend.owner  # type: ignore[attr-defined]
        assert await run_in(pool, python_image, policy, code, "one") == 200
        async with pool.lease(python_image, policy, "two") as lease:
            sandbox = lease.sandbox
            assert isinstance(sandbox, DockerSandbox) and sandbox.network is not None
            containers, networks = _ours(docker_client, owner)
            assert len(containers) >= 3  # two sandboxes and the proxy
            assert sandbox.network.name in networks
            # The proxy dies: sandboxes that relied on it are no longer alive, and the
            # next one gets a fresh proxy.
            (proxy,) = docker_client.api.containers(
                filters={"label": [f"{LABEL_OWNER}={owner}", f"{LABEL_ROLE}={ROLE_PROXY}"]}
            )
            docker_client.api.kill(proxy["Id"])
            deadline = time.monotonic() + 10
            while sandbox.alive:
                assert time.monotonic() < deadline, "sandbox still alive without its proxy"
                await asyncio.sleep(0.05)
        assert await run_in(pool, python_image, policy, code, "three") == 200
    deadline = time.monotonic() + 10
    while (left := _ours(docker_client, owner)) != ([], []) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert left == ([], []), f"left behind: {left}"


async def test_orphan_networks_of_a_dead_service_are_removed(
    testnet: EgressNet, docker_client: docker.DockerClient
) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    dead_owner = f"{socket.gethostname()}:{dead.pid}:0.000"
    network = docker_client.networks.create(
        f"sandbox-net-orphan-{secrets.token_hex(4)}",
        driver="bridge",
        internal=True,
        labels={LABEL_MANAGED: "1", LABEL_OWNER: dead_owner},
    )
    try:
        with _owner_holder() as owner:
            backend = DockerBackend(egress_network=testnet.name)
            backend.owner = owner
            try:
                assert await backend.remove_orphans() >= 1
            finally:
                await backend.close()
        with pytest.raises(docker.errors.NotFound):
            docker_client.api.inspect_network(network.id)
    finally:
        with contextlib.suppress(docker.errors.APIError):
            network.remove()


# --------------------------------------------------------------------------- image builds

BUILD_PROBE = r"""
import json, urllib.error, urllib.request

def fetch(url, proxied=True):
    opener = urllib.request.build_opener(*([] if proxied else [urllib.request.ProxyHandler({})]))
    try:
        with opener.open(url, timeout=10) as response:
            return {"status": response.status, "body": json.load(response)}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read().decode(errors="replace")[:300]}
    except OSError as exc:
        return {"error": str(exc)[:300]}

print("PROBE " + json.dumps({
    "allowed": fetch("http://allowed.example.test/from-a-build"),
    "port": fetch("http://allowed.example.test:8080/other-port"),
    "name": fetch("http://other.example.test/other-name"),
    "direct": fetch("http://WEB_IP/direct", proxied=False),
}))
"""


async def test_a_build_step_reaches_only_what_build_allow_names(
    net_pool: Pool,
    python_image: str,
    testnet: EgressNet,
    web: Web,
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    """build_network: allowlist: a RUN step's only way out is the egress proxy, which lets
    through build_allow's host and port (the rule's answer comes from the test host) and
    refuses another port or name with 403; going around the proxy has no route. The
    build's network is gone afterwards."""
    backend = net_pool.backend
    assert isinstance(backend, DockerBackend)
    config = EnvironmentsConfig(
        image_aliases={"python:3.13-slim": "sandbox-python"},
        build_network="allowlist",
        build_allow=[
            AllowRule(host="allowed.example.test", ports=(80,)),
            AllowRule(cidr=testnet.subnet, ports=(80,)),
        ],
    )
    builder = EnvironmentBuilder(
        tmp_path / "environments", config, build_networks=backend.build_networks(python_image)
    )
    context = tmp_path / "context"
    context.mkdir()
    (context / "probe.py").write_text(BUILD_PROBE.replace("WEB_IP", web.ip))
    (context / "Dockerfile").write_text(
        "FROM python:3.13-slim\nCOPY probe.py /probe.py\nRUN python3 /probe.py\n"
    )
    networks_before = {n["Id"] for n in docker_client.api.networks()}
    spec = EnvironmentSpec(dockerfile=context / "Dockerfile", build_timeout_s=300)
    result = await asyncio.to_thread(builder.build, spec, tenant="net")
    try:
        log = builder.records.log_path(result.record.environment).read_text()
        (line,) = [line for line in log.splitlines() if line.startswith("PROBE ")]
        probe = json.loads(line.removeprefix("PROBE "))
        assert probe["allowed"]["status"] == 200, probe
        assert probe["allowed"]["body"]["path"] == "/from-a-build", probe
        assert probe["port"]["status"] == 403, probe
        assert probe["name"]["status"] == 403, probe
        assert "error" in probe["direct"], probe
        left = {n["Id"] for n in docker_client.api.networks()} - networks_before
        assert not left, left
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(result.record.image, force=True)
