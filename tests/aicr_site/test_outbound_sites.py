"""Every outbound connection site in the product code goes through ``aicr_site.lib.outbound``.

The code of every product module is walked (its syntax tree: comments and docstrings do not
count) for the calls that open a connection or look a name up: ``urlopen``/``build_opener``,
``http.client`` connections, ``socket.socket``/``create_connection``/``getaddrinfo``,
``requests``/``httpx``, urllib3 pools and managers, and ``kubernetes`` clients and config
loaders. A call outside the policy module fails this test unless ``KNOWN`` lists it with the
reason it may go around the policy — so a new connection site is either routed through the
policy or argued for here, in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("aicr_site", "evidence_app", "validators_app", "recipes_app")
POLICY_MODULE = "aicr_site/lib/outbound.py"

# Dotted call names (as written, or their last part) that open a connection or do a lookup.
CONNECTING = {
    "urlopen",
    "build_opener",
    "OpenerDirector",
    "create_connection",
    "socket.socket",
    "getaddrinfo",
    "gethostbyname",
    "gethostbyname_ex",
    "HTTPConnection",
    "HTTPSConnection",
    "HTTPConnectionPool",
    "HTTPSConnectionPool",
    "PoolManager",
    "ProxyManager",
    "SOCKSProxyManager",
    "connection_from_url",
    "urllib3.request",
    "ApiClient",
    "new_client_from_config",
    "new_client_from_config_dict",
    "load_kube_config",
    "load_incluster_config",
    "Redis",
    "from_url",
    "SMTP",
    "SMTP_SSL",
    "FTP",
    "SigningContext",
}
CONNECTING_MODULES = ("requests.", "httpx.", "aiohttp.", "urllib3.request")

# (path, call) -> why it may go around the policy. Keep each reason true.
KNOWN = {
    ("aicr_site/metrics.py", "redis.Redis.from_url"): (
        "the operator's own broker (REDIS_URL), never an address a user gave"
    ),
    ("validators_app/services/keyless.py", "SigningContext.from_trust_config"): (
        "sigstore-python signing talks to the Fulcio/Rekor services of the operator's "
        "SITE_SIGSTORE_TRUST_CONFIG, never an address a user gave"
    ),
}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _connecting(name: str) -> bool:
    return (
        name in CONNECTING
        or any(part in CONNECTING for part in name.split("."))
        or any(name.startswith(prefix) or name == prefix for prefix in CONNECTING_MODULES)
    )


def connection_sites() -> set[tuple[str, str]]:
    sites: set[tuple[str, str]] = set()
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if "/migrations/" in relative:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = _dotted(node.func)
                    if name and _connecting(name):
                        sites.add((relative, name))
    return sites


def test_every_connection_site_goes_through_the_policy_module() -> None:
    sites = connection_sites()
    outside = {site for site in sites if site[0] != POLICY_MODULE}
    unexplained = sorted(outside - set(KNOWN))
    assert unexplained == [], (
        "connection sites outside aicr_site/lib/outbound.py: route them through the policy "
        f"(resolve + connect/opener/PinnedPoolManager/kubernetes_api_client) or list them in "
        f"KNOWN with the reason: {unexplained}"
    )


def test_the_scan_sees_the_policy_modules_own_sites_and_the_known_ones_still_exist() -> None:
    sites = connection_sites()
    policy = {name for path, name in sites if path == POLICY_MODULE}
    assert {"socket.socket", "socket.getaddrinfo", "urllib.request.build_opener"} <= policy
    assert any(name.endswith("ApiClient") for name in policy)
    assert set(KNOWN) <= sites, "a KNOWN exception is gone: remove it from the list"


def test_the_scan_would_catch_a_new_site() -> None:
    tree = ast.parse("import urllib.request\nurllib.request.urlopen('http://x')\n")
    calls = [_dotted(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert any(_connecting(name) for name in calls)
    for source in (
        "requests.get(u)",
        "kubernetes.client.ApiClient(c)",
        "socket.create_connection(a)",
    ):
        call = ast.parse(source).body[0].value  # type: ignore[attr-defined]
        assert _connecting(_dotted(call.func)), source
