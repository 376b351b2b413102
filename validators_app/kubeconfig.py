"""Check a kubeconfig a maintainer pasted, and build a ``kubernetes`` ApiClient from it.

No Django here. A kubeconfig is hostile input that ends up driving a worker, so the rules are
strict and every refusal names what is wrong (never a secret value):

- YAML: at most ``MAX_KUBECONFIG_BYTES``, UTF-8 text, one document, safe tags only, no anchors
  or aliases (kubeconfigs never need them; they are how YAML bombs work), bounded depth and size.
- Nothing that runs a program or reads a file on the worker, in ANY entry: ``exec`` and
  ``auth-provider`` plugins, and every file path (``certificate-authority``,
  ``client-certificate``, ``client-key``, ``tokenFile``/``token-file``).
- The current context's cluster and user may only use the fields this module knows
  (``CLUSTER_FIELDS``, ``USER_FIELDS``): exactly one credential (a token, an embedded client
  certificate + key, or a username + password), as kubectl requires.
- ``real`` clusters: ``https://`` with certificate verification (embedded CA or the system
  CAs; ``insecure-skip-tls-verify`` refused). ``http://`` only for a ``simulated`` cluster on a
  loopback host.
- The server's address, however it is spelled, must be one the cluster's ``server_policy``
  reaches (``aicr_site.lib.outbound``): never link-local or unspecified; loopback only for a
  ``simulated`` cluster. A name is checked when ``api_client`` resolves it, and the client
  connects to exactly the address checked, reading every answer within ``outbound.Limits``.

``check_kubeconfig`` returns a ``CheckedKubeconfig``: what pages may show (``info``) and a
minimal kubeconfig holding only the checked context (``minimal_yaml``), which is what gets
stored. ``api_client`` re-checks the text (rules may have tightened since it was stored) and
builds the client in memory: no ``~/.kube``, no ``KubeConfigLoader`` (whose module-wide cache
keeps decoded key files in /tmp until the process exits); a client key lives in an anonymous
in-memory file (``memfd``) closed with the client.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import urllib3
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from kubernetes import client as k8s_client

from aicr_site.lib import outbound
from recipes_app.resolver.yamlload import overlong_number

ENVIRONMENTS = ("real", "simulated")
MAX_KUBECONFIG_BYTES = 256 * 1024
_MAX_YAML_EVENTS = 20_000
_MAX_YAML_DEPTH = 16
_MAX_NAME_IN_MESSAGE = 80

# Keys that make a client run a program or read a file, refused wherever they appear.
_PLUGIN_KEYS = {
    "exec": "exec plugins are refused: they would run a program on the worker",
    "auth-provider": "auth-provider plugins are refused: they run code or refresh credentials "
    "through files on the worker",
}
_FILE_KEYS = (
    "certificate-authority",
    "client-certificate",
    "client-key",
    "tokenFile",
    "token-file",
)
CLUSTER_FIELDS = frozenset(
    {
        "server",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "disable-compression",
        "extensions",
    }
)
USER_FIELDS = frozenset(
    {"token", "client-certificate-data", "client-key-data", "username", "password", "extensions"}
)
_EMBED_HINT = "embed the credential instead (a service-account token or *-data fields)"


class KubeconfigError(ValueError):
    """A kubeconfig was refused; the message says what is wrong and never holds a secret."""


@dataclass(frozen=True)
class KubeconfigInfo:
    """What may be shown about a checked kubeconfig (no secret in here)."""

    server: str
    context: str
    cluster: str
    user: str
    namespace: str
    auth_kind: str  # token | client-certificate | basic
    tls: str  # plain-http | embedded-ca | system-cas | skip-verify


@dataclass(frozen=True)
class _Credentials:
    token: str = field(default="", repr=False)
    client_certificate_pem: bytes = field(default=b"", repr=False)
    client_key_pem: bytes = field(default=b"", repr=False)
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    ca_pem: bytes = field(default=b"", repr=False)
    tls_server_name: str = ""
    verify_tls: bool = True


@dataclass(frozen=True)
class CheckedKubeconfig:
    info: KubeconfigInfo
    minimal_yaml: str = field(repr=False)
    _credentials: _Credentials = field(repr=False)


def server_policy(
    environment: str, *, private: bool = True, allowed_networks: tuple[str, ...] = ()
) -> outbound.Policy:
    """The addresses a cluster of ``environment`` may be reached at: simulated clusters run on
    loopback (the site's simulator); real ones never do. Private ranges (where clusters usually
    live) unless the site says otherwise; ``allowed_networks`` are operator-listed CIDRs."""
    return outbound.Policy.with_networks(
        allowed_networks, loopback=environment == "simulated", private=private
    )


def check_kubeconfig(
    text: str | bytes, *, environment: str, policy: outbound.Policy | None = None
) -> CheckedKubeconfig:
    """Parse and check ``text`` for a cluster of ``environment`` (``real`` | ``simulated``),
    its server's address against ``policy`` (default: ``server_policy(environment)``).
    Raises ``KubeconfigError`` naming the first problem found."""
    if environment not in ENVIRONMENTS:
        raise KubeconfigError(f"environment must be one of {', '.join(ENVIRONMENTS)}")
    if policy is None:
        policy = server_policy(environment)
    document = _load_yaml(text)
    if not isinstance(document, dict):
        raise KubeconfigError("kubeconfig: the document is not a mapping (expected kind: Config)")
    kind = document.get("kind", "Config")
    if kind != "Config":
        raise KubeconfigError("kubeconfig: kind must be Config")
    clusters = _named_entries(document, "clusters", "cluster")
    users = _named_entries(document, "users", "user")
    contexts = _named_entries(document, "contexts", "context")
    for name, user in users.items():
        _refuse_plugins_and_files(user, f"users[{_quote(name)}].user")
    for name, cluster in clusters.items():
        _refuse_plugins_and_files(cluster, f"clusters[{_quote(name)}].cluster")

    current = document.get("current-context")
    if not isinstance(current, str) or not current:
        raise KubeconfigError("kubeconfig: current-context is missing (name the context to use)")
    if current not in contexts:
        raise KubeconfigError(
            f"kubeconfig: current-context {_quote(current)} names no entry in contexts"
        )
    context = contexts[current]
    where = f"contexts[{_quote(current)}].context"
    cluster_name = _required_str(context, "cluster", where)
    user_name = _required_str(context, "user", where)
    namespace = context.get("namespace", "")
    if not isinstance(namespace, str):
        raise KubeconfigError(f"{where}.namespace: must be a string")
    if cluster_name not in clusters:
        raise KubeconfigError(f"{where}.cluster: {_quote(cluster_name)} names no entry in clusters")
    if user_name not in users:
        raise KubeconfigError(f"{where}.user: {_quote(user_name)} names no entry in users")

    cluster = clusters[cluster_name]
    user = users[user_name]
    server, tls, tls_parts = _check_cluster(
        cluster, f"clusters[{_quote(cluster_name)}].cluster", environment, policy
    )
    auth_kind, credentials = _check_user(user, f"users[{_quote(user_name)}].user")
    minimal = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "contexts": [{"name": current, "context": dict(context)}],
        "clusters": [{"name": cluster_name, "cluster": dict(cluster)}],
        "users": [{"name": user_name, "user": dict(user)}],
    }
    return CheckedKubeconfig(
        info=KubeconfigInfo(
            server=server,
            context=current,
            cluster=cluster_name,
            user=user_name,
            namespace=namespace,
            auth_kind=auth_kind,
            tls=tls,
        ),
        minimal_yaml=yaml.safe_dump(minimal, sort_keys=False, default_flow_style=False),
        _credentials=_Credentials(**credentials, **tls_parts),
    )


@contextmanager
def api_client(
    text: str | bytes,
    *,
    environment: str,
    policy: outbound.Policy | None = None,
    limits: outbound.Limits | None = None,
) -> Iterator[k8s_client.ApiClient]:
    """A ``kubernetes.client.ApiClient`` for the checked kubeconfig ``text``; closed (and any
    client-key file with it) when the block exits. The server is resolved once, here, and
    checked against ``policy``; every request goes to that address, each answer within
    ``limits``. Raises ``KubeconfigError`` or ``outbound.DestinationRefused``."""
    if policy is None:
        policy = server_policy(environment)
    checked = check_kubeconfig(text, environment=environment, policy=policy)
    creds = checked._credentials
    parts = urlsplit(checked.info.server)
    destination = outbound.resolve(
        parts.hostname or "",
        parts.port or (443 if parts.scheme == "https" else 80),
        policy,
        what="the cluster's server",
    )
    configuration = k8s_client.Configuration(host=checked.info.server.rstrip("/"))
    configuration.verify_ssl = creds.verify_tls
    # No retries inside urllib3 (its default retries a refused or hung connection 3 times,
    # multiplying every timeout by 4): the orchestrator retries with backoff itself. No
    # redirects either: an API server has no reason to send the bearer token elsewhere.
    configuration.retries = urllib3.Retry(total=0, redirect=0)
    if creds.ca_pem:
        configuration.ca_cert_data = creds.ca_pem.decode("ascii")
    if creds.tls_server_name:
        configuration.tls_server_name = creds.tls_server_name
    # The same header values KubeConfigLoader sets.
    if creds.token:
        configuration.api_key["BearerToken"] = f"Bearer {creds.token}"
    elif creds.username:
        configuration.api_key["BearerToken"] = urllib3.util.make_headers(
            basic_auth=f"{creds.username}:{creds.password}"
        )["authorization"]
    with ExitStack() as stack:
        if creds.client_certificate_pem:
            # ssl.load_cert_chain only reads paths, and urllib3 loads it on every new connection.
            configuration.cert_file = stack.enter_context(
                _secret_file(creds.client_certificate_pem)
            )
            configuration.key_file = stack.enter_context(_secret_file(creds.client_key_pem))
        api = outbound.kubernetes_api_client(
            configuration, destination, limits or outbound.Limits()
        )
        stack.callback(api.close)
        yield api


@contextmanager
def _secret_file(content: bytes) -> Iterator[str]:
    """A path to ``content`` that never touches a disk where memfd exists (Linux); else a
    0600 file in a private directory, removed on exit."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("aicr-kubeconfig", 0)
        try:
            os.write(fd, content)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="aicr-kubeconfig-") as directory:
        path = os.path.join(directory, "data.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
        yield path


# --- YAML ---------------------------------------------------------------------------------


def _load_yaml(text: str | bytes) -> Any:
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if len(raw) > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(
            f"kubeconfig: {len(raw)} bytes is more than the {MAX_KUBECONFIG_BYTES}-byte limit"
        )
    if not raw.strip():
        raise KubeconfigError("kubeconfig: empty")
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KubeconfigError(
            f"kubeconfig: not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None
    if "\x00" in decoded:
        raise KubeconfigError("kubeconfig: contains a NUL byte (binary data, not YAML)")
    try:
        _check_yaml_shape(decoded)
        return yaml.load(decoded, Loader=yaml.CSafeLoader)
    except yaml.MarkedYAMLError as exc:
        # Only the problem and its position: PyYAML's own message quotes the offending line,
        # which may hold a token.
        mark = exc.problem_mark
        position = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise KubeconfigError(f"kubeconfig: malformed YAML{position}: {exc.problem}") from None
    except yaml.YAMLError:
        raise KubeconfigError("kubeconfig: malformed YAML") from None
    except KubeconfigError:
        raise
    except (ValueError, OverflowError):
        # A scalar PyYAML's constructors cannot build (a date like 2026-13-45). The value is
        # not quoted back: it may be a credential.
        raise KubeconfigError("kubeconfig: a value cannot be read as its YAML type") from None


def _check_yaml_shape(decoded: str) -> None:
    """Refuse anchors/aliases, deep nesting, multiple documents and huge event counts before
    anything is built (a streaming pass: nothing is expanded)."""
    depth = documents = 0
    # One frame per open mapping: [expecting a key, keys seen]; None for a sequence. A key
    # given twice is refused as kubectl (Go YAML) refuses it, rather than keeping the last.
    frames: list[list[Any] | None] = []
    for count, event in enumerate(yaml.parse(decoded, Loader=yaml.CSafeLoader), start=1):
        if count > _MAX_YAML_EVENTS:
            raise KubeconfigError(f"kubeconfig: more than {_MAX_YAML_EVENTS} YAML nodes")
        if isinstance(event, yaml.ScalarEvent):
            problem = overlong_number(event)
            if problem is not None:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise KubeconfigError(f"kubeconfig: {problem} (line {line})")
        if isinstance(event, yaml.NodeEvent) and frames and frames[-1] is not None:
            frame = frames[-1]
            if frame[0] and isinstance(event, yaml.ScalarEvent):
                if event.value in frame[1]:
                    line = event.start_mark.line + 1 if event.start_mark else 0
                    raise KubeconfigError(
                        f"kubeconfig: key {_quote(event.value)} appears twice in one mapping "
                        f"(line {line})"
                    )
                frame[1].add(event.value)
            frame[0] = not frame[0]
        if isinstance(event, yaml.MappingStartEvent):
            frames.append([True, set()])
        elif isinstance(event, yaml.SequenceStartEvent):
            frames.append(None)
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            frames.pop()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise KubeconfigError(
                "kubeconfig: YAML anchors and aliases are not accepted (a kubeconfig never "
                "needs them)"
            )
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise KubeconfigError("kubeconfig: more than one YAML document")
        elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > _MAX_YAML_DEPTH:
                raise KubeconfigError(f"kubeconfig: nested deeper than {_MAX_YAML_DEPTH} levels")
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


# --- structure ----------------------------------------------------------------------------


def _quote(name: str) -> str:
    shown = name if len(name) <= _MAX_NAME_IN_MESSAGE else name[:_MAX_NAME_IN_MESSAGE] + "…"
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _named_entries(document: Mapping[Any, Any], key: str, inner: str) -> dict[str, dict]:
    entries = document.get(key)
    if entries is None:
        raise KubeconfigError(f"kubeconfig: {key} is missing")
    if not isinstance(entries, list):
        raise KubeconfigError(f"kubeconfig: {key} must be a list")
    named: dict[str, dict] = {}
    for index, entry in enumerate(entries):
        where = f"{key}[{index}]"
        if not isinstance(entry, dict):
            raise KubeconfigError(f"kubeconfig: {where} must be a mapping with name and {inner}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise KubeconfigError(f"kubeconfig: {where}.name is missing")
        if name in named:
            raise KubeconfigError(f"kubeconfig: {key} has two entries named {_quote(name)}")
        body = entry.get(inner)
        if not isinstance(body, dict):
            raise KubeconfigError(f"kubeconfig: {key}[{_quote(name)}].{inner} must be a mapping")
        for field_name in body:
            if not isinstance(field_name, str):
                raise KubeconfigError(
                    f"kubeconfig: {key}[{_quote(name)}].{inner} has a key that is not a string"
                )
        named[name] = body
    return named


def _refuse_plugins_and_files(body: Mapping[str, Any], where: str) -> None:
    for key, reason in _PLUGIN_KEYS.items():
        if key in body:
            raise KubeconfigError(f"{where}.{key}: {reason}; {_EMBED_HINT}")
    for key in _FILE_KEYS:
        if key in body:
            raise KubeconfigError(
                f"{where}.{key}: file paths are refused: they would read a file on the worker; "
                f"{_EMBED_HINT}"
            )


def _required_str(body: Mapping[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise KubeconfigError(f"{where}.{key} is missing")
    return value


def _refuse_unknown(body: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    for key in body:
        if key not in allowed:
            raise KubeconfigError(
                f"{where}.{_quote(key)}: not supported here (supported: "
                f"{', '.join(sorted(allowed))})"
            )


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_server(
    server: Any, where: str, environment: str, policy: outbound.Policy
) -> tuple[str, str]:
    """The server URL and its scheme, or a KubeconfigError."""
    if not isinstance(server, str) or not server:
        raise KubeconfigError(f"{where}.server is missing")
    if len(server) > 2048 or any(ch.isspace() or ord(ch) < 0x20 for ch in server):
        raise KubeconfigError(f"{where}.server: not a valid URL")
    try:
        parts = urlsplit(server)
        port = parts.port
    except ValueError:
        raise KubeconfigError(f"{where}.server: not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise KubeconfigError(f"{where}.server: must be an https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise KubeconfigError(f"{where}.server: credentials in the URL are refused")
    if parts.query or parts.fragment:
        raise KubeconfigError(f"{where}.server: a query or fragment is not allowed")
    if port == 0:
        raise KubeconfigError(f"{where}.server: port 0 is not valid")
    host = parts.hostname
    if parts.scheme == "http":
        if environment != "simulated":
            raise KubeconfigError(
                f"{where}.server: http:// is refused for a real cluster; use https:// with "
                "certificate verification"
            )
        if not _is_loopback(host):
            raise KubeconfigError(
                f"{where}.server: http:// is allowed only for a simulated cluster on a loopback "
                "host (127.0.0.1, ::1, localhost)"
            )
    try:
        # As an address, however it is spelled (2852039166 is 169.254.169.254, where clouds
        # serve instance credentials); a name is checked when it is resolved.
        outbound.check_literal(host, policy, what="host")
    except outbound.DestinationRefused as exc:
        raise KubeconfigError(
            f"{where}.server: {exc.message}, which is not a cluster this site connects to"
        ) from None
    return server, parts.scheme


def _decode_b64(value: Any, where: str) -> bytes:
    if not isinstance(value, str) or not value.strip():
        raise KubeconfigError(f"{where}: must be base64 text")
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise KubeconfigError(f"{where}: not valid base64") from None


def _pem_certificates(value: Any, where: str) -> bytes:
    pem = _decode_b64(value, where)
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise KubeconfigError(
            f"{where}: not a PEM certificate (base64 of -----BEGIN CERTIFICATE-----)"
        ) from None
    if not certificates:
        raise KubeconfigError(f"{where}: holds no certificate")
    return pem


def _check_cluster(
    cluster: Mapping[str, Any], where: str, environment: str, policy: outbound.Policy
) -> tuple[str, str, dict[str, Any]]:
    _refuse_unknown(cluster, CLUSTER_FIELDS, where)
    server, scheme = _check_server(cluster.get("server"), where, environment, policy)
    skip = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(skip, bool):
        raise KubeconfigError(f"{where}.insecure-skip-tls-verify: must be true or false")
    tls_server_name = cluster.get("tls-server-name", "")
    if not isinstance(tls_server_name, str):
        raise KubeconfigError(f"{where}.tls-server-name: must be a string")
    parts: dict[str, Any] = {"tls_server_name": tls_server_name, "verify_tls": not skip}
    if scheme == "http":
        return server, "plain-http", parts
    if skip:
        if environment == "real":
            raise KubeconfigError(
                f"{where}.insecure-skip-tls-verify: refused for a real cluster: the server's "
                "certificate must be verified (add certificate-authority-data)"
            )
        if "certificate-authority-data" in cluster:
            raise KubeconfigError(
                f"{where}: certificate-authority-data and insecure-skip-tls-verify contradict "
                "each other"
            )
        return server, "skip-verify", parts
    if "certificate-authority-data" in cluster:
        parts["ca_pem"] = _pem_certificates(
            cluster["certificate-authority-data"], f"{where}.certificate-authority-data"
        )
        return server, "embedded-ca", parts
    return server, "system-cas", parts


def _check_user(user: Mapping[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    _refuse_unknown(user, USER_FIELDS, where)
    kinds = []
    if "token" in user:
        kinds.append("token")
    if "client-certificate-data" in user or "client-key-data" in user:
        kinds.append("client-certificate")
    if "username" in user or "password" in user:
        kinds.append("basic")
    if not kinds:
        raise KubeconfigError(
            f"{where}: no credential (a token, client-certificate-data + client-key-data, or "
            "username + password)"
        )
    if len(kinds) > 1:
        raise KubeconfigError(
            f"{where}: more than one credential ({', '.join(kinds)}); only one is allowed"
        )
    kind = kinds[0]
    if kind == "token":
        token = user["token"]
        if not isinstance(token, str) or not token.strip():
            raise KubeconfigError(f"{where}.token: must be a non-empty string")
        if any(ch.isspace() or ord(ch) < 0x21 or ord(ch) > 0x7E for ch in token.strip()):
            raise KubeconfigError(f"{where}.token: must be printable ASCII without spaces")
        return kind, {"token": token.strip()}
    if kind == "client-certificate":
        if "client-certificate-data" not in user or "client-key-data" not in user:
            raise KubeconfigError(
                f"{where}: client-certificate-data and client-key-data must be given together"
            )
        certificate = _pem_certificates(
            user["client-certificate-data"], f"{where}.client-certificate-data"
        )
        key = _decode_b64(user["client-key-data"], f"{where}.client-key-data")
        try:
            load_pem_private_key(key, password=None)
        except (ValueError, TypeError):
            raise KubeconfigError(
                f"{where}.client-key-data: not an unencrypted PEM private key"
            ) from None
        except Exception:  # cryptography raises UnsupportedAlgorithm for exotic keys
            raise KubeconfigError(f"{where}.client-key-data: unsupported private key") from None
        return kind, {"client_certificate_pem": certificate, "client_key_pem": key}
    username, password = user.get("username"), user.get("password")
    if not isinstance(username, str) or not username or not isinstance(password, str):
        raise KubeconfigError(f"{where}: username and password must both be strings")
    if ":" in username or any(ord(ch) < 0x20 for ch in username + password):
        raise KubeconfigError(f"{where}.username: must not contain ':' or control characters")
    return kind, {"username": username, "password": password}
