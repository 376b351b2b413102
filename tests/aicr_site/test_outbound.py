"""The outbound policy judges addresses, not strings: every spelling the resolver accepts is
checked as the address it maps to, and a connection goes to the checked address only.

No traffic leaves the machine: literal spellings are parsed without a lookup (the resolver is
asked for numeric hosts only) and names are answered by a patched ``socket.getaddrinfo``."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import urllib3

from aicr_site.lib import outbound

REAL = outbound.Policy(private=True)  # a real cluster: public and private, never loopback
SIMULATED = outbound.Policy(loopback=True, private=True)
PUBLIC_ONLY = outbound.Policy()  # an OCI registry

# (spelling as it appears in a URL's host, what the resolver maps it to)
METADATA = "169.254.169.254"
UNSPECIFIED = "0.0.0.0"  # noqa: S104 - an address under test, nothing binds to it
SPELLINGS = [
    ("2852039166", METADATA),
    ("0xa9fea9fe", METADATA),
    ("0251.0376.0251.0376", METADATA),
    ("169.254.43518", METADATA),
    ("169.16689662", METADATA),
    ("0xa9.0xfe.0xa9.0xfe", METADATA),
    ("[::ffff:169.254.169.254]", METADATA),
    ("[::ffff:a9fe:a9fe]", METADATA),
    ("[64:ff9b::a9fe:a9fe]", METADATA),  # NAT64
    ("[2002:a9fe:a9fe::]", METADATA),  # 6to4
    ("0", UNSPECIFIED),
    (UNSPECIFIED, UNSPECIFIED),
    ("[::]", "::"),
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("[::1]", "::1"),
    ("[::ffff:127.0.0.1]", "127.0.0.1"),
    ("[fe80::1]", "fe80::1"),
    ("167772161", "10.0.0.1"),
    ("10.0.0.1", "10.0.0.1"),
    ("192.168.1.10", "192.168.1.10"),
    ("[fd00::1]", "fd00::1"),
    ("8.8.8.8", "8.8.8.8"),
    ("134744072", "8.8.8.8"),
    ("[2606:4700:4700::1111]", "2606:4700:4700::1111"),
]

# (spelling, refused for a real cluster?, for a simulated one?, for a public-only caller?)
VERDICTS = {
    METADATA: (True, True, True),
    UNSPECIFIED: (True, True, True),
    "::": (True, True, True),
    "127.0.0.1": (True, False, True),
    "::1": (True, False, True),
    "fe80::1": (True, True, True),
    "10.0.0.1": (False, False, True),
    "192.168.1.10": (False, False, True),
    "fd00::1": (False, False, True),
    "8.8.8.8": (False, False, False),
    "2606:4700:4700::1111": (False, False, False),
}


def _refused(host: str, policy: outbound.Policy) -> bool:
    try:
        outbound.check_literal(host, policy)
    except outbound.DestinationRefused:
        return True
    return False


@pytest.mark.parametrize(("spelling", "address"), SPELLINGS)
def test_every_spelling_is_the_address_the_resolver_maps_it_to(spelling: str, address: str) -> None:
    literal = outbound.literal_address(spelling)
    assert literal is not None
    assert str(outbound._reached(literal)) == address or str(literal) == address


@pytest.mark.parametrize(("spelling", "address"), SPELLINGS)
def test_the_policy_judges_the_address_not_the_spelling(spelling: str, address: str) -> None:
    real, simulated, public_only = VERDICTS[address]
    assert _refused(spelling, REAL) is real, spelling
    assert _refused(spelling, SIMULATED) is simulated, spelling
    assert _refused(spelling, PUBLIC_ONLY) is public_only, spelling


@pytest.mark.parametrize("name", ["gpu.example.com", "localhost.example", "abc", "0x"])
def test_a_name_is_left_to_the_resolver(name: str) -> None:
    assert outbound.literal_address(name) is None
    assert not _refused(name, REAL)


@pytest.mark.parametrize("name", ["localhost", "LOCALHOST.", "api.localhost"])
def test_localhost_names_are_loopback(name: str) -> None:
    assert _refused(name, REAL)
    assert not _refused(name, SIMULATED)


def test_an_operator_listed_network_is_reachable_but_never_the_unspecified_address() -> None:
    policy = outbound.Policy.with_networks(["127.0.0.0/8", "0.0.0.0/0"])
    assert not _refused("2130706433", policy)
    assert _refused("0", policy)


def _answers(monkeypatch: pytest.MonkeyPatch, table: dict[str, list[str]]) -> list[str]:
    """Patch the resolver: names in ``table`` resolve to its addresses; any other lookup
    fails the test (no DNS query leaves the machine)."""
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("flags", 0) & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "not numeric")
        asked.append(host)
        assert host in table, f"unexpected lookup of {host!r}"
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                socket.IPPROTO_TCP,
                "",
                (a, port, 0, 0) if ":" in a else (a, port),
            )
            for a in table[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_name_is_refused_when_any_of_its_addresses_is(monkeypatch: pytest.MonkeyPatch) -> None:
    _answers(
        monkeypatch,
        {
            "public.example": ["93.184.216.34"],
            "mixed.example": ["93.184.216.34", "169.254.169.254"],
            "mapped.example": ["::ffff:127.0.0.1"],
        },
    )
    destination = outbound.resolve("public.example", 443, REAL)
    assert (str(destination.address), destination.sockaddr) == (
        "93.184.216.34",
        ("93.184.216.34", 443),
    )
    with pytest.raises(outbound.DestinationRefused, match="link-local"):
        outbound.resolve("mixed.example", 443, REAL)
    with pytest.raises(outbound.DestinationRefused, match="loopback"):
        outbound.resolve("mapped.example", 443, REAL)


def test_an_unresolvable_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "no such name")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with pytest.raises(outbound.Unresolvable):
        outbound.resolve("nowhere.example", 443, REAL)


def test_the_pinned_pool_reaches_only_its_destination() -> None:
    destination = outbound.resolve("127.0.0.1", 9, SIMULATED)
    manager = outbound.PinnedPoolManager(destination, outbound.Limits())
    with pytest.raises(outbound.DestinationRefused):
        manager.connection_from_url("https://other.example:9/")
    with pytest.raises(outbound.DestinationRefused):
        manager.connection_from_url("https://127.0.0.1:10/")
    pool = manager.connection_from_url("http://127.0.0.1:9/")
    assert pool.conn_kw["destination"] is destination
    assert isinstance(manager, urllib3.PoolManager)
