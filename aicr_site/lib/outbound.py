"""The one outbound connection policy: every connection the site makes goes through here.

Cluster API servers (the ``kubernetes`` client, for runs and "Test connection") and OCI
registries are addresses a user typed, so a connection to one is a request the site makes on
that user's behalf. The rules, in one place (``tests/aicr_site/test_outbound_sites.py`` fails
when product code opens a connection any other way):

* **Addresses, not strings.** A host is resolved once (``resolve``) and every address it
  resolves to is checked with ``ipaddress`` (``refusal``): the resolver maps ``2852039166``,
  ``0xa9fea9fe``, ``0251.0376.0251.0376``, ``169.254.43518`` and ``[::ffff:169.254.169.254]``
  all to 169.254.169.254, so that is what is checked. IPv6 forms that embed an IPv4 address
  (IPv4-mapped, IPv4-compatible, 6to4, NAT64) are checked as the IPv4 address they reach.
  ``literal_address`` does the same mapping without any network, for checks at input time.
* **A policy per caller** (``Policy``): unspecified (``0.0.0.0``, ``::``), multicast and
  reserved addresses are never a destination; link-local (169.254/16 — where clouds serve
  instance credentials — and fe80::/10), loopback and private ranges only where the policy
  allows them, or where the operator lists the network (``Policy.allowed_networks``).
* **No second lookup.** The connection goes to the checked address (``connect``); the name
  stays in the Host header and for TLS (SNI, certificate), so a name cannot be re-bound to an
  internal address between the check and the connection.
* **The peer is not trusted** (``Limits``): redirects are never followed automatically, every
  answer (status line, headers and body, as received) has a byte cap, and every exchange an
  overall deadline (connect, TLS handshake and answer), not only a per-read timeout: a peer
  dripping one byte at a time cannot hold a worker.
* **Errors do not say what a port answered.** ``OutboundError`` carries what the site decided;
  callers show users one reason class ("not reachable") for refused, timed-out and TLS failures
  alike (see ``validators_app.orchestrator.connection``).

Plain Python, no Django: callers build the ``Policy`` from their settings.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import io
import ipaddress
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

__all__ = [
    "AnswerTooLarge",
    "DeadlineExceeded",
    "Destination",
    "DestinationRefused",
    "Limits",
    "OutboundError",
    "PinnedPoolManager",
    "Policy",
    "Unresolvable",
    "check_literal",
    "connect",
    "kubernetes_api_client",
    "literal_address",
    "opener",
    "read_capped",
    "refusal",
    "resolve",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NUMERIC_IPV4 = re.compile(r"[0-9A-Fa-fXx.]+")
# Where clusters commonly live (VPCs, on-premises): reachable only where the policy says so.
_PRIVATE = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)


class OutboundError(Exception):
    """A connection the policy refused or cut; ``message`` is safe to show (it never holds what
    the peer sent)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DestinationRefused(OutboundError):
    """The host resolves to an address this caller may not connect to (nothing was sent)."""


class Unresolvable(DestinationRefused):
    """The host has no address (a lookup failure, or no IPv4/IPv6 answer)."""


class AnswerTooLarge(OutboundError):
    """The peer sent more than ``Limits.max_answer_bytes`` (the connection is dropped)."""


class DeadlineExceeded(OutboundError):
    """The exchange ran past ``Limits.deadline_s`` (the connection is dropped)."""


@dataclass(frozen=True)
class Policy:
    """Which addresses a caller may reach. Public addresses always; the rest as flagged."""

    loopback: bool = False
    private: bool = False  # RFC 1918, unique-local fc00::/7, shared 100.64/10
    link_local: bool = False
    # Operator-listed networks reachable whatever the flags say (never 0.0.0.0/:: or
    # multicast, which are not destinations at all).
    allowed_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def with_networks(cls, networks: Iterable[str], **flags: bool) -> Policy:
        """A policy whose ``allowed_networks`` are parsed from CIDR strings (``ValueError`` for
        one that is not a network)."""
        parsed = tuple(ipaddress.ip_network(n.strip(), strict=False) for n in networks if n)
        return cls(allowed_networks=parsed, **flags)


@dataclass(frozen=True)
class Limits:
    """What one answer may cost: bytes received (status line, headers and body as sent) and
    seconds for the whole exchange (``None``: per-read timeouts only)."""

    max_answer_bytes: int = 4 * 1024 * 1024
    deadline_s: float | None = 30.0


@dataclass(frozen=True)
class Destination:
    """One checked address of a host: the connection goes there and nowhere else."""

    host: str  # the name as given: the Host header, SNI and certificate are checked for it
    port: int
    family: int
    sockaddr: tuple[Any, ...] = field(repr=False)
    address: IPAddress
    addresses: tuple[IPAddress, ...] = ()  # every address the name resolved to (all checked)


# --- addresses -------------------------------------------------------------------------------


def _unbracket(host: str) -> str:
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.split("%", 1)[0]  # an IPv6 zone names an interface, not another address


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` spells as the resolver would map it (every IPv4 spelling: dotted,
    decimal, hex, octal, short forms; IPv6 with or without brackets), or ``None`` for a name.
    No network traffic: the system resolver is asked for numeric hosts only."""
    host = _unbracket(host)
    if not host:
        return None
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not _NUMERIC_IPV4.fullmatch(host):
        return None  # a name (only digits, hex and dots can spell an IPv4 address)
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    for info in infos:
        if info[0] in (socket.AF_INET, socket.AF_INET6):
            return ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
    return None


def _reached(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address delivers to, where it embeds one; else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        packed = address.packed
        if address in _NAT64 or (packed[:12] == bytes(12) and int(address) > 0xFFFF):
            return ipaddress.IPv4Address(packed[12:])  # NAT64, or IPv4-compatible ::a.b.c.d
    return address


def refusal(address: IPAddress, policy: Policy) -> str | None:
    """Why ``policy`` refuses ``address`` (a short reason class), or ``None`` when it may be
    reached. An IPv6 address that embeds an IPv4 one is judged by both."""
    reached = _reached(address)
    both = (address, reached)
    if any(a.is_unspecified for a in both):
        return "an unspecified address (0.0.0.0 or ::)"
    if any(a.is_multicast for a in both):
        return "a multicast address"
    if any(a in network for a in both for network in policy.allowed_networks):
        return None
    if any(a.is_loopback for a in both):
        return None if policy.loopback else "a loopback address"
    if any(a.is_link_local for a in both):
        return None if policy.link_local else "a link-local address"
    if any(reached in network for network in _PRIVATE if network.version == reached.version):
        return None if policy.private else "a private address"
    if not reached.is_global:
        return "a non-public address"  # reserved, documentation, benchmarking, broadcast, …
    return None


def check_literal(host: str, policy: Policy, *, what: str = "host") -> None:
    """Refuse, without any network, a host that spells an address ``policy`` refuses (or a
    ``localhost`` name where loopback is refused). Other names are checked when resolved."""
    name = _unbracket(host).lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        if not policy.loopback:
            raise DestinationRefused(f"{what} {host} is a loopback address")
        return
    address = literal_address(name)
    if address is None:
        return
    reason = refusal(address, policy)
    if reason is not None:
        raise DestinationRefused(f"{what} {host} is {reason} ({_reached(address)})")


def resolve(host: str, port: int, policy: Policy, *, what: str = "host") -> Destination:
    """Resolve ``host`` once and check every address it resolves to; the ``Destination`` to
    connect to (its first address). ``DestinationRefused`` when any address is refused (a name
    that also resolves to an internal address is not reachable through some other answer)."""
    check_literal(host, policy, what=what)
    name = _unbracket(host)
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, ValueError):
        raise Unresolvable(f"{what} {host} cannot be resolved") from None
    infos = [info for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)]
    if not infos:
        raise Unresolvable(f"{what} {host} has no IP address")
    addresses = tuple(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos)
    for address in addresses:
        reason = refusal(address, policy)
        if reason is not None:
            raise DestinationRefused(f"{what} {host} resolves to {reason}")
    return Destination(
        host=name,
        port=port,
        family=infos[0][0],
        sockaddr=tuple(infos[0][4]),
        address=addresses[0],
        addresses=addresses,
    )


# --- connections -----------------------------------------------------------------------------


def connect(
    destination: Destination,
    timeout: Any = None,
    source_address: Any = None,
    socket_options: Any = None,
) -> socket.socket:
    """A TCP connection to exactly ``destination`` (never a fresh DNS answer)."""
    sock = socket.socket(destination.family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        for option in socket_options or ():
            sock.setsockopt(*option)
        # The sentinel http.client passes for "no timeout given"; typeshed leaves it private.
        if timeout is not None and timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:  # type: ignore[attr-defined]
            sock.settimeout(timeout)
        if source_address:
            sock.bind(source_address)
        sock.connect(destination.sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


class _Deadline:
    """Seconds left until a monotonic deadline (``None``: no deadline)."""

    def __init__(self, seconds: float | None) -> None:
        self.at = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()


class _BoundedReader(io.RawIOBase):
    """The socket as a raw stream that counts what it receives and keeps to the deadline: each
    read waits at most the per-read timeout or what is left of the deadline, whichever is less."""

    def __init__(self, raw: Any, sock: Any, limits: Limits, deadline: _Deadline) -> None:
        super().__init__()
        self._raw = raw  # the socket's own file: it keeps the socket open until closed
        self._sock = sock
        self._limits = limits
        self._deadline = deadline
        self._per_read = sock.gettimeout()
        self._received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline.left()
        if left is not None:
            if left <= 0:
                raise DeadlineExceeded("the answer took longer than the deadline")
            self._sock.settimeout(left if self._per_read is None else min(left, self._per_read))
        allowance = self._limits.max_answer_bytes - self._received + 1
        view = memoryview(buffer)[: max(1, allowance)]
        try:
            count: int = self._raw.readinto(view) or 0
        except TimeoutError:
            left = self._deadline.left()
            if left is not None and left <= 0:
                raise DeadlineExceeded("the answer took longer than the deadline") from None
            raise
        self._received += count
        if self._received > self._limits.max_answer_bytes:
            raise AnswerTooLarge(
                f"the answer is over the limit of {self._limits.max_answer_bytes} bytes"
            )
        return count

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _BoundedHTTPResponse(http.client.HTTPResponse):
    def __init__(self, sock: Any, *args: Any, limits: Limits, deadline: _Deadline, **kw: Any):
        super().__init__(sock, *args, **kw)
        # Read the socket's own file (nothing is buffered yet) through the bounds.
        raw = self.fp.detach()
        self.fp = io.BufferedReader(_BoundedReader(raw, sock, limits, deadline))


class _PinnedMixin:
    """urllib3 connections that connect to the checked ``Destination`` and read answers within
    ``Limits``; the deadline runs from the connect (or, on a reused connection, the request)."""

    _destination: Destination
    _limits: Limits
    _outbound_deadline: _Deadline
    _connect_armed: bool
    _watchdog: threading.Timer | None = None

    def __init__(self, *args: Any, destination: Destination, limits: Limits, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._destination = destination
        self._limits = limits
        self._outbound_deadline = _Deadline(limits.deadline_s)
        self._connect_armed = False

    def _new_conn(self) -> socket.socket:
        self._outbound_deadline = deadline = _Deadline(self._limits.deadline_s)
        self._connect_armed = True
        timeout = self.timeout  # type: ignore[attr-defined]
        left = deadline.left()
        if left is not None and (timeout is None or timeout > left):
            timeout = max(left, 0.001)
        try:
            sock = connect(
                self._destination,
                timeout,
                source_address=self.source_address,  # type: ignore[attr-defined]
                socket_options=self.socket_options,  # type: ignore[attr-defined]
            )
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, "connection timed out") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"connection failed: {exc}") from exc  # type: ignore[arg-type]
        if left is not None:
            # The TLS handshake reads with per-read timeouts only: a watchdog ends a handshake
            # still running at the deadline (cancelled once connected; see ``connect``).
            self._watchdog = threading.Timer(max(left, 0.0), _shutdown, args=(sock,))
            self._watchdog.daemon = True
            self._watchdog.start()
        return sock

    def connect(self) -> None:
        try:
            super().connect()  # type: ignore[misc]
        finally:
            watchdog = getattr(self, "_watchdog", None)
            if watchdog is not None:
                watchdog.cancel()
                self._watchdog = None
        left = self._outbound_deadline.left()
        if left is not None and left <= 0:
            self.close()  # type: ignore[attr-defined]
            raise DeadlineExceeded("connecting took longer than the deadline")

    def request(self, *args: Any, **kwargs: Any) -> None:
        if not self._connect_armed:
            self._outbound_deadline = _Deadline(self._limits.deadline_s)
        super().request(*args, **kwargs)  # type: ignore[misc]

    def getresponse(self) -> Any:
        self._connect_armed = False
        # http.client builds the answer with ``self.response_class(sock, method=…)``.
        setattr(  # noqa: B010 - an instance attribute shadowing the class one on purpose
            self,
            "response_class",
            functools.partial(
                _BoundedHTTPResponse, limits=self._limits, deadline=self._outbound_deadline
            ),
        )
        return super().getresponse()  # type: ignore[misc]


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to end
        sock.shutdown(socket.SHUT_RDWR)


class _PinnedHTTPConnection(_PinnedMixin, HTTPConnection):
    pass


class _PinnedHTTPSConnection(_PinnedMixin, HTTPSConnection):
    pass


class _PinnedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _PinnedHTTPConnection


class _PinnedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _PinnedHTTPSConnection


class PinnedPoolManager(urllib3.PoolManager):
    """A ``urllib3.PoolManager`` that only reaches ``destination`` (scheme-agnostic: the
    ``kubernetes`` client picks the scheme from its URL), connecting to its checked address and
    reading every answer within ``limits``. A URL naming another host or port is refused."""

    def __init__(self, destination: Destination, limits: Limits, **connection_pool_kw: Any):
        connection_pool_kw.pop("retries", None)
        super().__init__(retries=urllib3.Retry(total=0, redirect=0), **connection_pool_kw)
        self._destination = destination
        self._limits = limits
        self.pool_classes_by_scheme = {"http": _PinnedHTTPPool, "https": _PinnedHTTPSPool}

    @property
    def limits(self) -> Limits:
        """What each answer may cost (a reader that decodes a body caps its output by it)."""
        return self._limits

    def _new_pool(
        self, scheme: str, host: str, port: int, request_context: dict[str, Any] | None = None
    ) -> HTTPConnectionPool:
        if _unbracket(host).lower() != self._destination.host.lower() or (
            port != self._destination.port
        ):
            raise DestinationRefused(f"{host}:{port} is not the checked destination")
        pool = super()._new_pool(scheme, host, port, request_context)
        pool.conn_kw["destination"] = self._destination
        pool.conn_kw["limits"] = self._limits
        return pool


def kubernetes_api_client(configuration: Any, destination: Destination, limits: Limits) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``configuration`` whose every request goes to
    ``destination`` within ``limits``: no proxy, no redirects, no retries inside urllib3."""
    from kubernetes import client as k8s_client

    configuration.proxy = None
    api = k8s_client.ApiClient(configuration)
    plain = api.rest_client.pool_manager
    if type(plain) is not urllib3.PoolManager:  # a proxy manager would connect elsewhere
        raise DestinationRefused("the kubernetes client was configured with a proxy")
    api.rest_client.pool_manager = PinnedPoolManager(
        destination, limits, **plain.connection_pool_kw
    )
    plain.clear()
    return api


# --- urllib (OCI) ----------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # redirects are the caller's to follow, each destination checked


def _pin(conn: http.client.HTTPConnection, destination: Destination) -> None:
    # http.client connects through ``self._create_connection`` (HTTPS wraps that socket with
    # SNI and certificate checks for ``self.host``, the name; the Host header is the name too).
    def create(_address: Any, timeout: Any = None, source_address: Any = None) -> socket.socket:
        return connect(destination, timeout, source_address)

    # The documented-by-source hook above; typeshed does not declare it.
    conn._create_connection = create  # type: ignore[attr-defined]


class _PinnedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, destination: Destination) -> None:
        super().__init__()
        self._destination = destination

    def http_open(self, req: urllib.request.Request) -> Any:
        def conn(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            made = http.client.HTTPConnection(host, **kwargs)
            _pin(made, self._destination)
            return made

        return self.do_open(conn, req)


class _PinnedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, destination: Destination) -> None:
        super().__init__()
        self._destination = destination

    def https_open(self, req: urllib.request.Request) -> Any:
        def conn(host: str, **kwargs: Any) -> http.client.HTTPSConnection:
            made = http.client.HTTPSConnection(host, **kwargs)
            _pin(made, self._destination)
            return made

        # ``_context`` is set by HTTPSHandler.__init__ (the default context); typeshed omits it.
        return self.do_open(conn, req, context=self._context)  # type: ignore[attr-defined]


def opener(destination: Destination) -> urllib.request.OpenerDirector:
    """A urllib opener pinned to ``destination``: no proxies from the environment, no
    automatic redirects."""
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        _NoRedirect(),
        _PinnedHTTPHandler(destination),
        _PinnedHTTPSHandler(destination),
    )


def read_capped(response: Any, limit: int, *, deadline_s: float | None = None) -> bytes:
    """Read at most ``limit`` bytes of ``response`` (a file-like answer) within ``deadline_s``;
    ``AnswerTooLarge`` past the limit (a declared Content-Length over it is refused unread),
    ``DeadlineExceeded`` past the deadline."""
    headers = getattr(response, "headers", None)
    declared = headers.get("Content-Length") if headers is not None else None
    if declared and str(declared).isdigit() and int(declared) > limit:
        raise AnswerTooLarge(f"the answer is {declared} bytes, over the limit of {limit}")
    deadline = _Deadline(deadline_s)
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline.left()
        if left is not None and left <= 0:
            raise DeadlineExceeded("the answer took longer than the deadline")
        chunk = response.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise AnswerTooLarge(f"the answer is over the limit of {limit} bytes")
