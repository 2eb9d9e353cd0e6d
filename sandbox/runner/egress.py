"""The egress proxy: the only way out of an allowlist sandbox (standard library only).

Runs as ``python3 -m runner.egress`` in one long-lived container per backend,
attached to the service's egress network and to every allowlist sandbox's
internal network. It serves:

* an HTTP proxy on TCP :data:`PROXY_PORT`: ``CONNECT host:port`` tunnels (for
  HTTPS) and absolute-URI plain HTTP (``GET http://host/path``), forwarded one
  request per connection, refused when the ``Host`` header names another
  host than the URI;
* a DNS responder on UDP and TCP :data:`DNS_PORT` that answers every query
  with ``REFUSED``: sandboxes get an answer, nothing is resolved or forwarded.

Decisions are per client: the client's source address (and the proxy address
it connected to, which names its network) maps to its sandbox's allow rules.
The service registers and unregisters clients over the container's attached
stdio, framed as in :mod:`runner.protocol`; sandboxes cannot reach it.

The rules (see :class:`Rules`): ``host`` matches one name exactly
(case-insensitive, a trailing dot ignored); ``domain: example.com`` matches
that name exactly and ``domain: '*.example.com'`` its subdomains only;
``cidr`` admits raw-IP targets; each rule has its ports. The proxy resolves
allowed names itself and connects to the address it checked (no second
lookup), and refuses every address that is not public (loopback, private,
link-local and cloud metadata, CGNAT, multicast, reserved, the egress
network's gateway, the host's addresses) unless a ``cidr`` rule names it
explicitly: the rule must lie inside the special block (``0.0.0.0/0`` names
nothing special; ``172.18.0.0/16`` names part of ``172.16.0.0/12``; only a
``/32`` names the gateway). The sandbox networks and the proxy's own addresses
are never reachable. Every spelling of an IPv4 address (decimal, hex, octal,
short forms) and IPv4-mapped IPv6 is normalised before any check.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import resource
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .protocol import ProtocolError, read_frame, write_frame

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
    IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

logger = logging.getLogger("egress")

PROTOCOL_VERSION = 1
PROXY_PORT = 3128
DNS_PORT = 53
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_LINE_BYTES = 8 * 1024
HEAD_TIMEOUT_S = 30.0
RESOLVE_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 300.0
MAX_CONNECTIONS_PER_CLIENT = 128
MAX_CONNECTIONS = 4096
MAX_TCP_DNS_QUERIES = 64
CHUNK = 64 * 1024

# --------------------------------------------------------------------------- addresses

SPECIAL_NETWORKS: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("169.254.169.254/32", "cloud metadata"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
    ("192.0.2.0/24", "reserved (documentation)"),
    ("192.88.99.0/24", "reserved (6to4 relay)"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved (benchmarking)"),
    ("198.51.100.0/24", "reserved (documentation)"),
    ("203.0.113.0/24", "reserved (documentation)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("255.255.255.255/32", "broadcast"),
    ("::/96", "reserved (IPv4-compatible)"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b::/96", "NAT64"),
    ("64:ff9b:1::/48", "NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/23", "reserved (IETF protocol assignments)"),
    ("2001:db8::/32", "reserved (documentation)"),
    ("2002::/16", "6to4"),
    ("fc00::/7", "private (unique local)"),
    ("fd00:ec2::254/128", "cloud metadata"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
"""Blocks that are not public; a resolved or raw address inside one needs a ``cidr`` rule."""

_HOST_CHARS = re.compile(r"[a-z0-9.-]+")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PORT = re.compile(r"[0-9]{1,5}")


class BadTarget(ValueError):
    """A request names its destination in a way the proxy does not accept."""


def parse_ipv4(text: str) -> ipaddress.IPv4Address:
    """Every spelling ``inet_aton`` accepts: ``a.b.c.d``, ``a.b.c``, ``a.b``, ``a``; each part
    decimal, octal (leading ``0``) or hex (``0x``), the last part filling the remaining bytes.
    """
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        raise BadTarget(f"{text!r} is not an IPv4 address")
    numbers = []
    for part in parts:
        try:
            if part[:2] in ("0x", "0X"):
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part[1:], 8))
            else:
                numbers.append(int(part, 10))
        except ValueError:
            raise BadTarget(f"{text!r} is not an IPv4 address") from None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise BadTarget(f"{text!r} is not an IPv4 address (a part is out of range)")
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def canonical_ip(address: IPAddress) -> IPAddress:
    """IPv4-mapped IPv6 (``::ffff:a.b.c.d``) becomes IPv4; a zone index is dropped."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.scope_id is not None:
            return ipaddress.IPv6Address(str(address).split("%", 1)[0])
    return address


def parse_host(text: str) -> str | IPAddress:
    """A request's host: a normalised name (lower case, no trailing dot) or an address."""
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        if "%" in inner:
            raise BadTarget("IPv6 zone indexes are not accepted")
        try:
            return canonical_ip(ipaddress.IPv6Address(inner))
        except ValueError:
            raise BadTarget(f"{text!r} is not an IPv6 address") from None
    name = text.lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > 253 or not _HOST_CHARS.fullmatch(name):
        raise BadTarget(f"{text[:80]!r} is not a host name")
    labels = name.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return parse_ipv4(name)  # the URL standard's rule: a numeric last label is IPv4
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise BadTarget(f"{text[:80]!r} is not a host name")
    return name


def parse_authority(text: str, default_port: int | None) -> tuple[str | IPAddress, int]:
    """``host:port``, ``[v6]:port`` or (with a default port) a bare host."""
    if "@" in text:
        raise BadTarget("credentials in the authority are refused")
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise BadTarget(f"{text[:80]!r} is not a valid authority")
        host_text, rest = text[: end + 1], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise BadTarget(f"{text[:80]!r} is not a valid authority")
        port_text = rest[1:] if rest else None
    elif ":" in text:
        host_text, port_text = text.rsplit(":", 1)
    else:
        host_text, port_text = text, None
    if port_text is None or (port_text == "" and default_port is not None):
        if default_port is None:
            raise BadTarget(f"{text[:80]!r} names no port")
        port = default_port
    else:
        if not _PORT.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
            raise BadTarget(f"{text[:80]!r} names no valid port")
        port = int(port_text)
    return parse_host(host_text), port


# --------------------------------------------------------------------------- rules


def _network(text: str) -> IPNetwork:
    net = ipaddress.ip_network(text, strict=False)
    if isinstance(net, ipaddress.IPv6Network) and net.prefixlen >= 96:
        mapped = net.network_address.ipv4_mapped
        if mapped is not None:  # ::ffff:a.b.c.d/1xx is the IPv4 block
            return ipaddress.IPv4Network(f"{mapped}/{net.prefixlen - 96}", strict=False)
    return net


def _contains(net: IPNetwork, address: IPAddress) -> bool:
    return net.version == address.version and address in net


def _subnet_of(inner: IPNetwork, outer: IPNetwork) -> bool:
    return inner.version == outer.version and inner.subnet_of(outer)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Rule:
    """One allow rule, as the service sends it: exactly one of host, domain, cidr."""

    host: str | None = None
    domain: str | None = None
    subdomains: bool = False
    network: IPNetwork | None = None
    ports: frozenset[int] = frozenset({80, 443})

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Rule:
        ports = frozenset(int(p) for p in raw.get("ports") or (80, 443))
        if not ports or not all(1 <= p <= 65535 for p in ports):
            raise ValueError(f"bad ports in rule {raw!r}")
        given = [k for k in ("host", "domain", "cidr") if raw.get(k) is not None]
        if len(given) != 1:
            raise ValueError(f"a rule names exactly one of host, domain, cidr: {raw!r}")
        if raw.get("host") is not None:
            return cls(host=_rule_name(raw["host"]), ports=ports)
        if raw.get("domain") is not None:
            domain = str(raw["domain"])
            wildcard = domain.startswith("*.")
            return cls(
                domain=_rule_name(domain.removeprefix("*.")), subdomains=wildcard, ports=ports
            )
        return cls(network=_network(str(raw["cidr"])), ports=ports)

    def matches_name(self, name: str) -> bool:
        if self.host is not None:
            return name == self.host
        if self.domain is not None:
            if self.subdomains:
                return name.endswith("." + self.domain)
            return name == self.domain
        return False


def _rule_name(text: str) -> str:
    name = str(text).lower()
    return name[:-1] if name.endswith(".") else name


class Refused(Exception):
    """A request the rules do not allow; the message is the short reason sent back."""


@dataclass
class Client:
    """A registered sandbox: its address, the proxy address on its network, its rules."""

    address: IPAddress
    local: IPAddress
    subnet: IPNetwork
    rules: tuple[Rule, ...]
    connections: set[asyncio.Task[None]] = field(default_factory=set)


class AddressPolicy:
    """Address classification shared by all clients (special blocks, never-reachable blocks)."""

    def __init__(self) -> None:
        self.base: list[tuple[IPNetwork, str]] = [
            (_network(cidr), reason) for cidr, reason in SPECIAL_NETWORKS
        ]
        self.special = list(self.base)
        self.blocked: list[IPNetwork] = []

    def configure(self, special: Iterable[dict[str, str]], blocked: Iterable[str]) -> None:
        """Replace the service-supplied blocks (the host's addresses change over time)."""
        extra = [(_network(e["cidr"]), e.get("reason", "special")) for e in special]
        self.special = self.base + extra
        self.blocked = [_network(cidr) for cidr in blocked]

    def special_block(self, address: IPAddress) -> tuple[IPNetwork, str] | None:
        """The most specific special block holding ``address`` (non-global: itself)."""
        found = [(net, why) for net, why in self.special if _contains(net, address)]
        if found:
            return max(found, key=lambda item: item[0].prefixlen)
        if not address.is_global:
            return ipaddress.ip_network(address), "not a public address"
        return None

    def check_address(
        self, client: Client, blocked: Iterable[IPNetwork], address: IPAddress, port: int
    ) -> None:
        """Raise :class:`Refused` unless ``client`` may connect to ``address:port``."""
        for net in blocked:
            if _contains(net, address):
                raise Refused(f"{address} belongs to the sandbox platform")
        special = self.special_block(address)
        if special is None:
            return
        block, reason = special
        for rule in client.rules:
            if (
                rule.network is not None
                and port in rule.ports
                and _contains(rule.network, address)
                and _subnet_of(rule.network, block)
            ):
                return
        raise Refused(f"{address} is {reason} ({block}); no cidr rule names it")


# --------------------------------------------------------------------------- HTTP


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]

    def values(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name]


def parse_head(head: bytes) -> Request:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise BadTarget("undecodable request") from None
    lines = text[:-4].split("\r\n") if text.endswith("\r\n\r\n") else text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise BadTarget("malformed request line")
    method, target, version = parts
    if not _TOKEN.fullmatch(method) or version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadTarget("malformed request line")
    headers = []
    for line in lines[1:]:
        if not line or line[0] in " \t":
            raise BadTarget("malformed header (folded or empty)")
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\x00"):
            raise BadTarget("malformed header")
        headers.append((name, value.strip(" \t")))
    if len(headers) > MAX_HEADERS:
        raise BadTarget("too many headers")
    return Request(method, target, version, headers)


_HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
        "transfer-encoding",
        "content-length",
    }
)


def response(status: int, reason: str, text: str) -> bytes:
    body = (text + "\n").encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "X-Sandbox-Egress: refused\r\n\r\n"
    ).encode() + body


# --------------------------------------------------------------------------- DNS


def refused_dns_reply(query: bytes) -> bytes | None:
    """A REFUSED answer echoing ``query``'s id and question; ``None`` for non-queries."""
    if len(query) < 12:
        return None
    qid, flags, qdcount = struct.unpack(">HHH", query[:6])
    if flags & 0x8000:
        return None  # a response: never answer those (no loops)
    opcode = (flags >> 11) & 0xF
    question = b""
    if qdcount == 1 and opcode == 0:
        offset = 12
        while offset < len(query):
            length = query[offset]
            if length == 0 or length & 0xC0:
                break
            offset += 1 + length
        if offset < len(query) and query[offset] == 0 and offset + 5 <= len(query):
            question = query[12 : offset + 5]
    out_flags = 0x8000 | (opcode << 11) | (flags & 0x0100) | 5  # QR, opcode, RD, REFUSED
    return struct.pack(">HHHHHH", qid, out_flags, 1 if question else 0, 0, 0, 0) + question


class _DnsUdp(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        reply = refused_dns_reply(data)
        if reply is not None and self.transport is not None:
            logger.debug("dns: REFUSED a query from %s", addr[0])
            self.transport.sendto(reply, addr)


async def _dns_tcp(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        for _ in range(MAX_TCP_DNS_QUERIES):
            (size,) = struct.unpack(
                ">H", await asyncio.wait_for(reader.readexactly(2), HEAD_TIMEOUT_S)
            )
            query = await asyncio.wait_for(reader.readexactly(size), HEAD_TIMEOUT_S)
            reply = refused_dns_reply(query)
            if reply is None:
                break
            writer.write(struct.pack(">H", len(reply)) + reply)
            await writer.drain()
    except (asyncio.IncompleteReadError, TimeoutError, OSError):
        pass
    finally:
        writer.close()


# --------------------------------------------------------------------------- the proxy


class Proxy:
    """The HTTP proxy, the DNS responder and the client registry."""

    def __init__(self, max_connections: int = MAX_CONNECTIONS) -> None:
        self.max_connections = max_connections
        self.policy = AddressPolicy()
        self.clients: dict[IPAddress, Client] = {}
        self.connections = 0
        self.allowed = 0
        self.refused = 0

    # ---------------------------------------------------------------- control

    def control(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        if op in ("hello", "ping"):
            return {"protocol": PROTOCOL_VERSION, "pid": os.getpid()}
        if op == "configure":
            self.policy.configure(message.get("special") or (), message.get("blocked") or ())
            return {}
        if op == "register":
            address = canonical_ip(ipaddress.ip_address(message["client"]))
            client = Client(
                address=address,
                local=canonical_ip(ipaddress.ip_address(message["local"])),
                subnet=_network(message["subnet"]),
                rules=tuple(Rule.parse(rule) for rule in message["rules"]),
            )
            old = self.clients.pop(address, None)
            if old is not None:
                self._drop(old)
            self.clients[address] = client
            logger.debug("registered %s (%d rules)", address, len(client.rules))
            return {}
        if op == "unregister":
            address = canonical_ip(ipaddress.ip_address(message["client"]))
            gone = self.clients.pop(address, None)
            closed = self._drop(gone) if gone is not None else 0
            logger.debug("unregistered %s (%d connections closed)", address, closed)
            return {"closed": closed}
        if op == "stats":
            return {
                "clients": len(self.clients),
                "connections": self.connections,
                "allowed": self.allowed,
                "refused": self.refused,
            }
        raise ValueError(f"unknown op {op!r}")

    @staticmethod
    def _drop(client: Client) -> int:
        for task in client.connections:
            task.cancel()
        return len(client.connections)

    def _blocked(self) -> list[IPNetwork]:
        nets = list(self.policy.blocked)
        for client in self.clients.values():
            nets.append(client.subnet)
            nets.append(ipaddress.ip_network(client.local))
        return nets

    # ---------------------------------------------------------------- decisions

    async def decide(self, client: Client, host: str | IPAddress, port: int) -> list[IPAddress]:
        """The addresses ``client`` may connect to for ``host:port``; :class:`Refused` if none."""
        blocked = self._blocked()
        if not isinstance(host, str):
            address = canonical_ip(host)
            covering = [r for r in client.rules if r.network and _contains(r.network, address)]
            if not covering:
                raise Refused(f"raw address {address} is not allowed (no cidr rule covers it)")
            if not any(port in r.ports for r in covering):
                raise Refused(f"port {port} is not allowed for {address}")
            self.policy.check_address(client, blocked, address, port)
            return [address]
        named = [r for r in client.rules if r.matches_name(host)]
        if not named:
            raise Refused(f"host {host} is not in the allowlist")
        if not any(port in r.ports for r in named):
            raise Refused(f"port {port} is not allowed for {host}")
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP),
                RESOLVE_TIMEOUT_S,
            )
        except (OSError, TimeoutError) as exc:
            raise Refused(f"cannot resolve {host}: {exc}") from None
        allowed: list[IPAddress] = []
        reasons: list[str] = []
        for info in infos:
            address = canonical_ip(ipaddress.ip_address(info[4][0]))
            if address in allowed:
                continue
            try:
                self.policy.check_address(client, blocked, address, port)
            except Refused as refusal:
                reasons.append(str(refusal))
                continue
            allowed.append(address)
        if not allowed:
            why = "; ".join(dict.fromkeys(reasons)) or "no address"
            raise Refused(f"{host} resolves to no allowed address: {why}")
        return allowed

    async def open(
        self, addresses: list[IPAddress], port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        errors = []
        for address in addresses:
            family = socket.AF_INET if address.version == 4 else socket.AF_INET6
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(
                    loop.sock_connect(sock, (str(address), port)), CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError) as exc:
                sock.close()
                errors.append(f"{address}: {exc or type(exc).__name__}")
                continue
            return await asyncio.open_connection(sock=sock, limit=CHUNK)
        raise ConnectionError("; ".join(errors))

    # ---------------------------------------------------------------- serving

    async def serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = writer.get_extra_info("peername")
        local = writer.get_extra_info("sockname")
        task = asyncio.current_task()
        client = None
        try:
            peer_ip = canonical_ip(ipaddress.ip_address(peer[0]))
            local_ip = canonical_ip(ipaddress.ip_address(local[0]))
            client = self.clients.get(peer_ip)
            if client is None or client.local != local_ip:
                logger.debug("refused %s: not a registered sandbox", peer_ip)
                self.refused += 1
                writer.write(response(403, "Forbidden", "refused: unknown client"))
                await writer.drain()
                return
            if (
                len(client.connections) >= MAX_CONNECTIONS_PER_CLIENT
                or self.connections >= self.max_connections
            ):
                writer.write(response(429, "Too Many Requests", "refused: too many connections"))
                await writer.drain()
                return
            assert task is not None
            client.connections.add(task)
            self.connections += 1
            try:
                await self._serve(client, reader, writer)
            finally:
                self.connections -= 1
                client.connections.discard(task)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, OSError):
            pass
        except asyncio.CancelledError:
            pass  # unregistered or shutting down
        except Exception:
            logger.exception("proxy connection from %s failed", peer)
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(
        self, client: Client, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            writer.write(response(431, "Request Header Fields Too Large", "header too large"))
            await writer.drain()
            return
        origin_form = authority = ""
        try:
            request = parse_head(head)
            if request.method == "CONNECT":
                host, port = parse_authority(request.target, None)
            else:
                host, port, origin_form, authority = self._absolute(request)
        except BadTarget as exc:
            self.refused += 1
            logger.debug("bad request from %s: %s", client.address, exc)
            writer.write(response(400, "Bad Request", f"bad request: {exc}"))
            await writer.drain()
            return
        try:
            if request.method != "CONNECT":
                self._check_host_header(request, host, port)
            addresses = await self.decide(client, host, port)
        except (Refused, BadTarget) as exc:
            self.refused += 1
            logger.debug(
                "refused %s %r from %s: %s",
                request.method,
                request.target[:200],
                client.address,
                exc,
            )
            writer.write(response(403, "Forbidden", f"refused: {exc}"))
            await writer.drain()
            return
        try:
            upstream_reader, upstream_writer = await self.open(addresses, port)
        except ConnectionError as exc:
            logger.debug("cannot connect %s to %s:%d: %s", client.address, host, port, exc)
            writer.write(response(502, "Bad Gateway", f"cannot connect to {host}:{port}"))
            await writer.drain()
            return
        self.allowed += 1
        logger.debug(
            "allowed %s %r from %s via %s",
            request.method,
            request.target[:200],
            client.address,
            addresses[0],
        )
        try:
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await _tunnel(reader, writer, upstream_reader, upstream_writer)
            else:
                await self._forward(
                    request,
                    origin_form,
                    authority,
                    reader,
                    writer,
                    upstream_reader,
                    upstream_writer,
                )
        finally:
            with contextlib.suppress(Exception):
                upstream_writer.close()

    @staticmethod
    def _absolute(request: Request) -> tuple[str | IPAddress, int, str, str]:
        target = request.target
        scheme, sep, rest = target.partition("://")
        if not sep:
            raise BadTarget("not a proxy request: use an absolute http:// URI or CONNECT")
        if scheme.lower() != "http":
            raise BadTarget(f"scheme {scheme[:16]!r} is not proxied; use CONNECT for https")
        if any(c in target for c in "\\#") or any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in target):
            raise BadTarget("the URI contains characters that are not allowed")
        cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
        authority, path = rest[:cut], rest[cut:]
        if not authority:
            raise BadTarget("the URI names no host")
        host, port = parse_authority(authority, 80)
        if not path.startswith("/"):
            path = "/" + path
        return host, port, path, authority

    @staticmethod
    def _check_host_header(request: Request, host: str | IPAddress, port: int) -> None:
        values = request.values("host")
        if len(values) > 1:
            raise Refused("more than one Host header")
        if values:
            try:
                header_host, header_port = parse_authority(values[0], 80)
            except BadTarget:
                raise Refused("the Host header is not a valid host") from None
            if (header_host, header_port) != (host, port):
                raise Refused(f"the Host header {values[0][:100]!r} does not match the URI")

    async def _forward(
        self,
        request: Request,
        origin_form: str,
        authority: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream_reader: asyncio.StreamReader,
        upstream_writer: asyncio.StreamWriter,
    ) -> None:
        named_hop = {
            token.strip().lower()
            for value in request.values("connection") + request.values("proxy-connection")
            for token in value.split(",")
        }
        encodings = [
            e.strip().lower() for v in request.values("transfer-encoding") for e in v.split(",")
        ]
        lengths = request.values("content-length")
        if encodings and lengths:
            raise_bad = "both Transfer-Encoding and Content-Length"
        elif encodings and encodings != ["chunked"]:
            raise_bad = "only the chunked transfer coding is accepted"
        elif len(set(lengths)) > 1 or (lengths and not lengths[0].isdigit()):
            raise_bad = "bad Content-Length"
        else:
            raise_bad = ""
        if raise_bad:
            writer.write(response(400, "Bad Request", f"bad request: {raise_bad}"))
            await writer.drain()
            return
        lines = [f"{request.method} {origin_form} {request.version}"]
        for name, value in request.headers:
            if name.lower() in _HOP_BY_HOP or name.lower() in named_hop:
                continue
            lines.append(f"{name}: {value}")
        if encodings:
            lines.append("Transfer-Encoding: chunked")
        elif lengths:
            lines.append(f"Content-Length: {int(lengths[0])}")
        if not request.values("host"):
            lines.append(f"Host: {authority}")
        lines.append("Connection: close")
        upstream_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

        async def send_body() -> None:
            if encodings:
                await _copy_chunked(reader, upstream_writer)
            elif lengths:
                await _copy_exact(reader, upstream_writer, int(lengths[0]))
            await upstream_writer.drain()

        body = asyncio.ensure_future(send_body())
        try:
            await _copy(upstream_reader, writer, Activity())
        finally:
            body.cancel()
            with contextlib.suppress(BaseException):
                await body


class Activity:
    """When bytes last moved through a connection (either way)."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def touch(self) -> None:
        self.last = time.monotonic()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Activity) -> None:
    while True:
        try:
            data = await asyncio.wait_for(reader.read(CHUNK), IDLE_TIMEOUT_S)
        except TimeoutError:
            if time.monotonic() - seen.last >= IDLE_TIMEOUT_S:
                raise
            continue
        if not data:
            return
        seen.touch()
        writer.write(data)
        await writer.drain()


async def _tunnel(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    seen = Activity()

    async def one_way(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        await _copy(src, dst, seen)
        with contextlib.suppress(OSError):
            if dst.can_write_eof():
                dst.write_eof()

    up = asyncio.ensure_future(one_way(reader, upstream_writer))
    down = asyncio.ensure_future(one_way(upstream_reader, writer))
    try:
        done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)


async def _copy_exact(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, size: int
) -> None:
    while size > 0:
        data = await asyncio.wait_for(reader.read(min(size, CHUNK)), IDLE_TIMEOUT_S)
        if not data:
            return
        size -= len(data)
        writer.write(data)
        await writer.drain()


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    line = await asyncio.wait_for(reader.readuntil(b"\r\n"), IDLE_TIMEOUT_S)
    if len(line) > MAX_LINE_BYTES:
        raise ConnectionError("chunk line too long")
    return line


async def _copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        line = await _read_line(reader)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ConnectionError("bad chunk size") from None
        writer.write(line)
        if size == 0:
            while True:  # trailers, then the empty line
                trailer = await _read_line(reader)
                writer.write(trailer)
                if trailer == b"\r\n":
                    return
        await _copy_exact(reader, writer, size + 2)


# --------------------------------------------------------------------------- main


def _control_loop(
    proxy: Proxy,
    loop: asyncio.AbstractEventLoop,
    in_fd: int,
    out_fd: int,
) -> None:
    """Serve the control channel (blocking, in a thread); stop the loop at end of file."""
    try:
        while True:
            message = read_frame(in_fd)
            if message is None:
                break
            reply: dict[str, Any] = {"id": message.get("id")}

            async def handle(message: dict[str, Any] = message) -> dict[str, Any]:
                return proxy.control(message)

            try:
                reply.update(asyncio.run_coroutine_threadsafe(handle(), loop).result())
                reply["ok"] = True
            except Exception as exc:
                reply.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            write_frame(out_fd, reply)
    except (ProtocolError, OSError) as exc:
        logger.error("control channel failed: %s", exc)
    finally:
        loop.call_soon_threadsafe(loop.stop)


async def _start(proxy: Proxy, host: str, port: int, dns_port: int) -> list[Any]:
    loop = asyncio.get_running_loop()
    servers: list[Any] = [
        await asyncio.start_server(
            proxy.serve_client, host, port, limit=MAX_HEAD_BYTES, backlog=1024, reuse_address=True
        )
    ]
    if dns_port:
        transport, _ = await loop.create_datagram_endpoint(_DnsUdp, local_addr=(host, dns_port))
        servers.append(transport)
        servers.append(await asyncio.start_server(_dns_tcp, host, dns_port, reuse_address=True))
    return servers


class _LevelFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname} {super().format(record)}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="runner.egress")
    parser.add_argument("--listen", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=PROXY_PORT)
    parser.add_argument("--dns-port", type=int, default=DNS_PORT)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LevelFormatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(args.log_level.upper())
    # The channel is fds 0 and 1; nothing else may write to fd 1.
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proxy = Proxy(max_connections=max(16, min(MAX_CONNECTIONS, (hard - 64) // 2)))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    servers = loop.run_until_complete(_start(proxy, args.listen, args.port, args.dns_port))
    logger.info("listening on %s:%d (dns :%d)", args.listen, args.port, args.dns_port)
    control = threading.Thread(
        target=_control_loop, args=(proxy, loop, in_fd, out_fd), name="control", daemon=True
    )
    control.start()
    try:
        loop.run_forever()  # until the control channel closes: the service is gone
    finally:
        for server in servers:
            server.close()
        for task in asyncio.all_tasks(loop):
            task.cancel()
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.sleep(0))
        loop.close()


if __name__ == "__main__":
    main()
