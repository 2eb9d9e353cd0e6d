"""Allowlist networking for Docker sandboxes: one egress proxy, one internal network per sandbox.

A sandbox whose policy says ``network: {mode: allowlist, ...}`` gets a bridge
network of its own, created ``internal`` (no route out of the machine, Docker's
isolation rules drop forwarding to every other network) and with
``com.docker.network.bridge.inhibit_ipv4`` (the host has no IPv4 address on
it, so there is no gateway: neither the host nor the service's API can be
reached from inside). Its subnet is a small block (``/28``) taken from
:data:`DEFAULT_SANDBOX_SUBNETS`; the sandbox, the proxy and the (absent)
gateway get fixed addresses in it, so the sandbox's address is registered
with the proxy before its container even starts. IPv6 is switched off inside
the sandbox (no link-local path to the host's bridge).

On each such network the only other endpoint is the service's egress proxy
(:mod:`sandbox.runner.egress`, one container per backend, on the egress
network: the engine's default bridge unless configured). The sandbox's
``HTTP(S)_PROXY`` points at it and its resolver at the proxy's DNS responder,
which refuses every query: names are resolved by the proxy, for allowed
hosts only. The backend speaks to the proxy over the container's attached
stdio (as to a runner): register a sandbox's address with its allow rules,
unregister it, nothing else; sandboxes cannot reach that channel.

Networks carry the same ``managed``/``owner`` labels as containers, so that
:meth:`AllowlistNetworks.remove_orphans` finds those of a dead service.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import random
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import psutil
from docker.types import LogConfig, Ulimit

from ..errors import ContainerLostError, EngineError, NotFoundError
from ..policy import AllowRule, Policy
from .channel import RunnerChannel

logger = logging.getLogger(__name__)

PROXY_PORT = 3128
DNS_PORT = 53
DEFAULT_EGRESS_NETWORK = "bridge"
DEFAULT_SANDBOX_SUBNETS = "198.18.0.0/15"
"""Where sandbox networks are carved from: the benchmarking block, unused on real networks."""
SANDBOX_PREFIX = 28
NETWORK_PREFIX = "sandbox-net-"
PROXY_NAME_PREFIX = "sandbox-egress-"
LABEL_ROLE = "sandbox-platform.role"
ROLE_PROXY = "egress-proxy"
ROLE_NETWORK = "sandbox-network"
EGRESS_MODULE = "runner.egress"
RUNNER_DIR = "/opt/sandbox"
PROXY_USER = "65534:65534"  # nobody
PROXY_MEMORY = 256 << 20
PROXY_PIDS = 64
PROXY_TIMEOUT_S = 15.0
NETWORK_REMOVE_TIMEOUT_S = 10.0
MAX_SUBNET_TRIES = 32
ENV_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY_NAMES = ("NO_PROXY", "no_proxy")

# Inside the sandbox: no IPv6 at all (Docker sets this for IPv4-only networks; we insist).
SANDBOX_SYSCTLS: Mapping[str, str] = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
}


@dataclass(frozen=True)
class SandboxNetwork:
    """One sandbox's internal network and the fixed addresses on it."""

    id: str
    name: str
    subnet: ipaddress.IPv4Network
    proxy_ip: ipaddress.IPv4Address
    sandbox_ip: ipaddress.IPv4Address
    generation: int  # of the proxy registered with
    #: An image build's network: the engine gives each build step the next free address,
    #: so every address but the gateway's and the proxy's is the build's.
    shared: bool = False

    @property
    def clients(self) -> list[ipaddress.IPv4Address]:
        """The addresses registered with the proxy for this network."""
        if not self.shared:
            return [self.sandbox_ip]
        return [a for a in self.subnet.hosts() if a > self.proxy_ip]

    @property
    def proxy_url(self) -> str:
        return f"http://{self.proxy_ip}:{PROXY_PORT}"

    @property
    def env(self) -> dict[str, str]:
        """What user code needs to go through the proxy."""
        env = dict.fromkeys(ENV_NAMES, self.proxy_url)
        env.update(dict.fromkeys(NO_PROXY_NAMES, ""))
        return env


def rules_message(rules: Iterable[AllowRule]) -> list[dict[str, Any]]:
    """The allow rules as the proxy reads them."""
    out = []
    for rule in rules:
        entry: dict[str, Any] = {"ports": list(rule.ports)}
        for key in ("host", "domain", "cidr"):
            value = getattr(rule, key)
            if value is not None:
                entry[key] = value
        out.append(entry)
    return out


def host_addresses() -> list[str]:
    """This host's interface addresses but loopback (the service runs on the Docker host)."""
    found = []
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            text = entry.address.split("%", 1)[0]
            with contextlib.suppress(ValueError):
                address = ipaddress.ip_address(text)
                if not address.is_loopback:  # in the proxy's container that is the proxy
                    found.append(str(address))
    return sorted(set(found))


def proxy_container_settings(
    image: str, egress_network: str, labels: Mapping[str, str], log_level: str
) -> dict[str, Any]:
    """Create-container arguments for the egress proxy (pure)."""
    host_config = {
        "network_mode": egress_network,
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        # Port 53 without a capability; and this container must never route packets.
        "sysctls": {"net.ipv4.ip_unprivileged_port_start": "0", "net.ipv4.ip_forward": "0"},
        "mem_limit": PROXY_MEMORY,
        "memswap_limit": PROXY_MEMORY,
        "nano_cpus": int(1e9),
        "pids_limit": PROXY_PIDS,
        # nofile: the engine's own limit (the proxy raises its soft limit to it).
        "ulimits": [Ulimit(name="core", soft=0, hard=0)],
        "tmpfs": {"/tmp": "rw,noexec,nosuid,nodev,size=16m"},
        "init": True,
        "log_config": LogConfig(type="none"),
        "auto_remove": True,
    }
    return {
        "image": image,
        "command": [
            "python3",
            "-B",
            "-m",
            EGRESS_MODULE,
            "--port",
            str(PROXY_PORT),
            "--dns-port",
            str(DNS_PORT),
            "--log-level",
            log_level,
        ],
        "working_dir": RUNNER_DIR,
        "user": PROXY_USER,
        "environment": {"LANG": "C.UTF-8"},
        "stdin_open": True,
        "detach": False,  # StdinOnce: the proxy exits when the service's attach closes
        "labels": {**labels, LABEL_ROLE: ROLE_PROXY},
        "host_config": host_config,
    }


class ProxyChannel(RunnerChannel):
    """The proxy's stdio channel; its log lines (``LEVEL message``) keep their level."""

    def _runner_log(self, payload: bytes) -> None:
        self._log += payload
        *lines, rest = self._log.split(b"\n")
        self._log = bytearray(rest[-4096:])
        for raw in lines:
            line = raw.decode(errors="replace")[:4096]
            level_name, _, message = line.partition(" ")
            level = logging.getLevelName(level_name)
            if not isinstance(level, int):
                level, message = logging.WARNING, line
            logger.log(level, "egress proxy %s: %s", self._name, message)


class EgressProxy:
    """The proxy container of one backend and its control channel."""

    def __init__(self, container_id: str, channel: RunnerChannel, generation: int) -> None:
        self.id = container_id
        self.channel = channel
        self.generation = generation
        self.egress_ips: list[str] = []
        self.gateways: list[str] = []

    @property
    def alive(self) -> bool:
        return not self.channel.closed

    async def call(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.channel.call(message, PROXY_TIMEOUT_S)
        if not reply.get("ok"):
            raise EngineError(f"egress proxy refused {message.get('op')}: {reply.get('error')}")
        return reply


class AllowlistNetworks:
    """Creates, tracks and removes the proxy and the per-sandbox networks of one backend."""

    def __init__(
        self,
        client: docker.DockerClient,
        socket_path: str,
        api_version: str,
        *,
        egress_network: str = DEFAULT_EGRESS_NETWORK,
        egress_image: str | None = None,
        sandbox_subnets: str = DEFAULT_SANDBOX_SUBNETS,
    ) -> None:
        self.client = client
        self.socket_path = socket_path
        self.api_version = api_version
        self.egress_network = egress_network
        self.egress_image = egress_image
        self.supernet = ipaddress.IPv4Network(sandbox_subnets)
        if self.supernet.prefixlen > SANDBOX_PREFIX:
            raise ValueError(f"sandbox_subnets {sandbox_subnets} is smaller than a /28")
        self.proxy: EgressProxy | None = None
        self.networks: dict[str, SandboxNetwork] = {}  # by id
        self._proxy_lock = asyncio.Lock()
        self._generation = 0
        self._claimed: set[ipaddress.IPv4Network] = set()
        self._closed = False

    # ------------------------------------------------------------------ the proxy

    def proxy_alive(self, generation: int) -> bool:
        proxy = self.proxy
        return proxy is not None and proxy.generation == generation and proxy.alive

    async def _ensure_proxy(self, image: str, labels: Mapping[str, str]) -> EgressProxy:
        async with self._proxy_lock:
            if self._closed:
                raise EngineError("the backend is closing")
            if self.proxy is not None and self.proxy.alive:
                return self.proxy
            if self.proxy is not None:
                logger.warning("the egress proxy died; starting a new one")
                await self._remove_container(self.proxy.id)
                self.proxy = None
            self._generation += 1
            self.proxy = await self._start_proxy(image, labels, self._generation)
            return self.proxy

    def _proxy_image(self, fallback: str) -> str:
        if self.egress_image is None:
            from sandbox.host.images import resolve_image

            try:
                self.egress_image = resolve_image("python")
            except NotFoundError:
                self.egress_image = fallback  # every image holds the runner, egress included
        return self.egress_image

    async def _start_proxy(
        self, image: str, labels: Mapping[str, str], generation: int
    ) -> EgressProxy:
        level = "DEBUG" if logger.isEnabledFor(logging.DEBUG) else "INFO"
        settings = proxy_container_settings(
            await asyncio.to_thread(self._proxy_image, image), self.egress_network, labels, level
        )
        settings["name"] = f"{PROXY_NAME_PREFIX}{secrets.token_hex(6)}"
        host_config = self.client.api.create_host_config(**settings.pop("host_config"))

        def _create() -> str:
            try:
                created = self.client.api.create_container(**settings, host_config=host_config)
            except docker.errors.NotFound as exc:
                raise NotFoundError(
                    f"cannot create the egress proxy ({exc}); check the image and that the "
                    f"egress network {self.egress_network!r} exists"
                ) from exc
            except docker.errors.APIError as exc:
                raise EngineError(f"cannot create the egress proxy: {exc}") from exc
            return str(created["Id"])

        container_id = await asyncio.to_thread(_create)
        channel: RunnerChannel | None = None
        try:
            channel = await ProxyChannel.attach(self.socket_path, self.api_version, container_id)
            proxy = EgressProxy(container_id, channel, generation)
            try:
                await asyncio.to_thread(self.client.api.start, container_id)
            except docker.errors.APIError as exc:
                raise EngineError(f"cannot start the egress proxy: {exc}") from exc
            await proxy.call({"op": "hello"})
            info = await asyncio.to_thread(self.client.api.inspect_container, container_id)
            attached = info["NetworkSettings"]["Networks"] or {}
            proxy.egress_ips = [
                ip
                for net in attached.values()
                for ip in (net.get("IPAddress"), net.get("GlobalIPv6Address"))
                if ip
            ]
            proxy.gateways = await asyncio.to_thread(self._egress_gateways)
            await self._configure(proxy)
        except BaseException:
            await self._remove_container(container_id)
            if channel is not None:
                await channel.close()
            raise
        logger.info(
            "egress proxy %s started on %s (%s)",
            container_id[:12],
            self.egress_network,
            ", ".join(proxy.egress_ips) or "no address",
        )
        return proxy

    async def _configure(self, proxy: EgressProxy) -> None:
        """Tell the proxy the addresses that stand for the host (refreshed per sandbox:
        every new Docker network puts one more on the host) and its own (never reachable)."""
        special = [
            {"cidr": gateway, "reason": "the egress network's gateway (the host)"}
            for gateway in proxy.gateways
        ]
        special += [
            {"cidr": address, "reason": "an address of the service's host"}
            for address in await asyncio.to_thread(host_addresses)
        ]
        await proxy.call({"op": "configure", "special": special, "blocked": proxy.egress_ips})

    def _egress_gateways(self) -> list[str]:
        info = self.client.api.inspect_network(self.egress_network)
        gateways = [c.get("Gateway") for c in (info.get("IPAM") or {}).get("Config") or []]
        return [g.split("/", 1)[0] for g in gateways if g]

    # ------------------------------------------------------------------ networks

    async def attach(self, image: str, policy: Policy, labels: Mapping[str, str]) -> SandboxNetwork:
        """A new internal network for one sandbox, the proxy on it, the sandbox registered."""
        return await self._attach(image, policy.network.allow, labels, shared=False)

    async def attach_build(
        self, image: str, rules: Iterable[AllowRule], labels: Mapping[str, str]
    ) -> SandboxNetwork:
        """A new internal network for one image build's steps, every address on it
        registered with ``rules`` (``image``: the proxy's, if it is not running yet)."""
        return await self._attach(image, rules, labels, shared=True)

    async def _attach(
        self, image: str, rules: Iterable[AllowRule], labels: Mapping[str, str], *, shared: bool
    ) -> SandboxNetwork:
        proxy = await self._ensure_proxy(image, labels)
        network = await asyncio.to_thread(self._create_network, labels, proxy.generation)
        network = dataclasses.replace(network, shared=shared)
        self.networks[network.id] = network
        try:
            await asyncio.to_thread(self._connect_proxy, proxy, network)
            await self._configure(proxy)
            for client in network.clients:
                await proxy.call(
                    {
                        "op": "register",
                        "client": str(client),
                        "local": str(network.proxy_ip),
                        "subnet": str(network.subnet),
                        "rules": rules_message(rules),
                    }
                )
        except BaseException:
            await self.release(network)
            raise
        return network

    @contextlib.contextmanager
    def build_network(
        self,
        loop: asyncio.AbstractEventLoop,
        image: str,
        rules: Iterable[AllowRule],
        labels: Mapping[str, str],
    ) -> Iterator[tuple[str, dict[str, str]]]:
        """From a thread other than ``loop``'s: an image build's network (:meth:`attach_build`)
        for as long as the block runs, as its name and the proxy variables of its steps."""
        network = asyncio.run_coroutine_threadsafe(
            self.attach_build(image, list(rules), labels), loop
        ).result(PROXY_TIMEOUT_S * 4)
        try:
            yield network.name, network.env
        finally:
            asyncio.run_coroutine_threadsafe(self.release(network), loop).result(
                PROXY_TIMEOUT_S * 4
            )

    def _used_subnets(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        used = []
        for net in self.client.api.networks():
            for config in (net.get("IPAM") or {}).get("Config") or []:
                with contextlib.suppress(ValueError, TypeError):
                    used.append(ipaddress.ip_network(config.get("Subnet"), strict=False))
        return used

    def _create_network(self, labels: Mapping[str, str], generation: int) -> SandboxNetwork:
        if self._closed:
            raise EngineError("the backend is closing")
        blocks = 1 << (SANDBOX_PREFIX - self.supernet.prefixlen)
        start = random.randrange(blocks)
        used = self._used_subnets()
        tries = 0
        for offset in range(blocks):
            index = (start + offset) % blocks
            base = int(self.supernet.network_address) + (index << (32 - SANDBOX_PREFIX))
            subnet = ipaddress.IPv4Network((base, SANDBOX_PREFIX))
            if subnet in self._claimed or any(u.version == 4 and subnet.overlaps(u) for u in used):
                continue
            tries += 1
            if tries > MAX_SUBNET_TRIES:
                break
            self._claimed.add(subnet)
            try:
                return self._create_on(subnet, labels, generation)
            except docker.errors.APIError as exc:
                self._claimed.discard(subnet)
                if "overlap" in str(exc).lower() or exc.status_code == 409:
                    continue  # another service took it between our look and our create
                raise EngineError(f"cannot create a sandbox network: {exc}") from exc
        raise EngineError(
            f"no free /{SANDBOX_PREFIX} left in {self.supernet} for a sandbox network; "
            "configure a larger sandbox_subnets range or fewer allowlist sandboxes"
        )

    def _create_on(
        self, subnet: ipaddress.IPv4Network, labels: Mapping[str, str], generation: int
    ) -> SandboxNetwork:
        hosts = list(subnet.hosts())
        gateway, proxy_ip, sandbox_ip = hosts[0], hosts[1], hosts[2]
        name = f"{NETWORK_PREFIX}{secrets.token_hex(6)}"
        ipam = docker.types.IPAMConfig(
            pool_configs=[docker.types.IPAMPool(subnet=str(subnet), gateway=str(gateway))]
        )
        created = self.client.api.create_network(
            name,
            driver="bridge",
            internal=True,
            check_duplicate=True,
            ipam=ipam,
            options={
                "com.docker.network.bridge.inhibit_ipv4": "true",
                "com.docker.network.bridge.enable_ip_masquerade": "false",
                "com.docker.network.bridge.enable_icc": "true",
            },
            labels={**labels, LABEL_ROLE: ROLE_NETWORK},
        )
        network = SandboxNetwork(
            id=str(created["Id"]),
            name=name,
            subnet=subnet,
            proxy_ip=proxy_ip,
            sandbox_ip=sandbox_ip,
            generation=generation,
        )
        self.networks[network.id] = network
        if self._closed:  # close() ran while we were creating it: it must not stay behind
            _remove_network_waiting(self.client, network.id)
            self.networks.pop(network.id, None)
            raise EngineError("the backend is closing")
        return network

    def _connect_proxy(self, proxy: EgressProxy, network: SandboxNetwork) -> None:
        try:
            self.client.api.connect_container_to_network(
                proxy.id, network.id, ipv4_address=str(network.proxy_ip)
            )
        except docker.errors.APIError as exc:
            raise EngineError(f"cannot attach the egress proxy to {network.name}: {exc}") from exc

    async def release(self, network: SandboxNetwork) -> None:
        """Unregister the sandbox and remove its network (its container must be gone)."""
        proxy = self.proxy
        if proxy is not None and proxy.generation == network.generation and proxy.alive:
            with contextlib.suppress(ContainerLostError, EngineError, TimeoutError):
                for client in network.clients:
                    await proxy.call({"op": "unregister", "client": str(client)})
        await asyncio.to_thread(_remove_network_waiting, self.client, network.id)
        self.networks.pop(network.id, None)
        self._claimed.discard(network.subnet)

    async def _remove_container(self, container_id: str) -> None:
        def _remove() -> None:
            deadline = time.monotonic() + NETWORK_REMOVE_TIMEOUT_S
            with contextlib.suppress(docker.errors.NotFound):
                try:
                    self.client.api.remove_container(container_id, force=True)
                except docker.errors.APIError as exc:
                    if exc.status_code != 409:
                        raise
                # 409: the engine is already removing it; wait until it is gone.
                while time.monotonic() < deadline:
                    self.client.api.inspect_container(container_id)
                    time.sleep(0.05)

        try:
            await asyncio.to_thread(_remove)
        except docker.errors.APIError as exc:
            logger.warning("could not remove the egress proxy %s: %s", container_id[:12], exc)

    # ------------------------------------------------------------------ cleanup

    async def close(self) -> None:
        """Remove the proxy and every network made here (the caller removes sandboxes first)."""
        async with self._proxy_lock:
            self._closed = True
            proxy, self.proxy = self.proxy, None
        if proxy is not None:
            await self._remove_container(proxy.id)
            await proxy.channel.close()
        networks = list(self.networks.values())
        await asyncio.gather(
            *(asyncio.to_thread(_remove_network_waiting, self.client, n.id) for n in networks)
        )
        self.networks.clear()

    async def remove_orphans(
        self, managed: str, owner_key: str, owner_alive: Callable[[str], bool]
    ) -> int:
        """Remove networks labelled ``managed`` whose owner (label ``owner_key``) is gone."""

        def _orphans() -> list[str]:
            found = self.client.api.networks(filters={"label": [managed]})
            return [
                str(n["Id"])
                for n in found
                if not owner_alive((n.get("Labels") or {}).get(owner_key, ""))
            ]

        orphans = await asyncio.to_thread(_orphans)
        await asyncio.gather(
            *(asyncio.to_thread(_remove_network_waiting, self.client, nid) for nid in orphans)
        )
        if orphans:
            logger.info("removed %d sandbox networks left by an earlier run", len(orphans))
        return len(orphans)


def _remove_network_waiting(client: docker.DockerClient, network_id: str) -> None:
    """Disconnect what is left on a network (the proxy) and remove it, waiting out endpoints
    still being torn down."""
    deadline = time.monotonic() + NETWORK_REMOVE_TIMEOUT_S
    while True:
        try:
            info = client.api.inspect_network(network_id)
            for container_id in info.get("Containers") or {}:
                with contextlib.suppress(docker.errors.APIError):
                    client.api.disconnect_container_from_network(
                        container_id, network_id, force=True
                    )
            client.api.remove_network(network_id)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if time.monotonic() >= deadline:
                logger.warning("could not remove network %s: %s", network_id[:12], exc)
                return
            time.sleep(0.1)
