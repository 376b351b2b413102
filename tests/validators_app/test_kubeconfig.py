"""validators_app.kubeconfig: every refusal names the problem; nothing runs, reads files or
leaks a secret; a checked kubeconfig drives a real kubernetes client over HTTP and mTLS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from tests.validators_app.kubeconfigs import (
    SECRET_TOKEN,
    VersionHandler,
    b64,
    client_certificate_user,
    https_kubeconfig,
    kubeconfig,
    pki,
    serve_version,
)
from validators_app.kubeconfig import (
    MAX_KUBECONFIG_BYTES,
    KubeconfigError,
    api_client,
    check_kubeconfig,
    server_policy,
)

# The test servers listen on loopback, where a real cluster never is unless the operator lists
# the network (CLUSTER_ALLOWED_NETWORKS).
REAL_ON_LOOPBACK = server_policy("real", allowed_networks=("127.0.0.1/32",))


def refused(text: str | bytes, environment: str = "simulated") -> str:
    with pytest.raises(KubeconfigError) as caught:
        check_kubeconfig(text, environment=environment)
    message = str(caught.value)
    assert SECRET_TOKEN not in message
    return message


# --- accepted ---------------------------------------------------------------------------------


def test_it_accepts_a_loopback_http_token_kubeconfig_for_a_simulated_cluster() -> None:
    checked = check_kubeconfig(kubeconfig(), environment="simulated")
    assert checked.info.server == "http://127.0.0.1:6443"
    assert (checked.info.context, checked.info.cluster, checked.info.user) == (
        "test",
        "test-cluster",
        "test-user",
    )
    assert checked.info.auth_kind == "token"
    assert checked.info.tls == "plain-http"
    assert SECRET_TOKEN not in repr(checked)
    assert SECRET_TOKEN not in repr(checked.info)


def test_it_accepts_https_with_an_embedded_ca_and_a_client_certificate_for_real() -> None:
    checked = check_kubeconfig(
        https_kubeconfig("https://gpu.example.com:6443", user=client_certificate_user()),
        environment="real",
    )
    assert checked.info.auth_kind == "client-certificate"
    assert checked.info.tls == "embedded-ca"
    assert "PRIVATE KEY" not in repr(checked)


def test_it_accepts_https_with_the_system_cas_and_basic_auth() -> None:
    checked = check_kubeconfig(
        kubeconfig(server="https://gpu.example.com", user={"username": "u", "password": "p"}),
        environment="real",
    )
    assert (checked.info.auth_kind, checked.info.tls) == ("basic", "system-cas")


def test_it_keeps_only_the_current_context_in_the_minimal_kubeconfig() -> None:
    text = kubeconfig(
        extra={
            "preferences": {"colors": True},
            "clusters": [
                {"name": "test-cluster", "cluster": {"server": "http://127.0.0.1:6443"}},
                {"name": "other", "cluster": {"server": "https://other.example.com"}},
            ],
        }
    )
    minimal = check_kubeconfig(text, environment="simulated").minimal_yaml
    assert "other.example.com" not in minimal
    assert "preferences" not in minimal
    assert check_kubeconfig(minimal, environment="simulated").info.server == "http://127.0.0.1:6443"


# --- YAML and size ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("clusters: [unclosed", "malformed YAML at line"),
        ("- a\n- b\n", "not a mapping"),
        ("just a string", "not a mapping"),
        ("kind: Config\n---\nkind: Config\n", "more than one YAML document"),
        ("kind: !!python/object/apply:os.system ['true']\n", "malformed YAML"),
        ("a: &x 1\nb: *x\n", "anchors and aliases"),
        ("kind: Pod\n", "kind must be Config"),
    ],
)
def test_it_refuses_bad_yaml_with_a_clear_message(text: str, expected: str) -> None:
    assert expected in refused(text)


def test_it_refuses_a_yaml_billion_laughs_bomb_before_expanding_it() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [{', '.join(['*' + previous] * 9)}]")
    assert "anchors and aliases" in refused("\n".join(lines))


def test_it_refuses_a_huge_file_by_size() -> None:
    huge = "# " + "x" * (10 * 1024 * 1024)
    assert f"{MAX_KUBECONFIG_BYTES}-byte limit" in refused(huge)


def test_it_refuses_binary_and_non_utf8_input() -> None:
    assert "not UTF-8" in refused(b"\xff\xfe\x00k\x00i\x00n\x00d")
    assert "NUL byte" in refused(b"kind: Config\x00\x01\x02")
    assert "not UTF-8" in refused(os.urandom(64) + b"\xff")


def test_it_refuses_deep_nesting_and_too_many_nodes() -> None:
    assert "nested deeper" in refused("a: " + "[" * 100 + "]" * 100)
    assert "YAML nodes" in refused("a: [" + ",".join(["1"] * 30_000) + "]")


def test_a_malformed_line_holding_a_token_is_not_quoted_back() -> None:
    text = f"users:\n- name: u\n  user:\n    token: {SECRET_TOKEN}\n   bad: [\n"
    refused(text)  # asserts the token is not in the message


# --- missing pieces ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (kubeconfig(current_context=None), "current-context is missing"),
        (kubeconfig(current_context="nope"), 'current-context "nope" names no entry in contexts'),
        (kubeconfig(context={"user": "test-user"}), 'contexts["test"].context.cluster is missing'),
        (
            kubeconfig(context={"cluster": "test-cluster"}),
            'contexts["test"].context.user is missing',
        ),
        (
            kubeconfig(context={"cluster": "gone", "user": "test-user"}),
            '"gone" names no entry in clusters',
        ),
        (
            kubeconfig(context={"cluster": "test-cluster", "user": "gone"}),
            '"gone" names no entry in users',
        ),
        ("kind: Config\ncurrent-context: x\nusers: []\ncontexts: []\n", "clusters is missing"),
        (kubeconfig(extra={"users": {"a": 1}}), "users must be a list"),
        (kubeconfig(extra={"users": [{"user": {}}]}), "users[0].name is missing"),
        (kubeconfig(extra={"users": [{"name": "u"}]}), 'users["u"].user must be a mapping'),
        (kubeconfig(server=""), 'clusters["test-cluster"].cluster.server is missing'),
        (kubeconfig(user={}), "no credential"),
    ],
)
def test_it_names_the_missing_piece(text: str, expected: str) -> None:
    assert expected in refused(text)


def test_it_refuses_two_entries_with_one_name() -> None:
    users = [{"name": "test-user", "user": {"token": "a"}}, {"name": "test-user", "user": {}}]
    assert 'two entries named "test-user"' in refused(kubeconfig(extra={"users": users}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, 'key "apiVersion" appears twice in one mapping'),  # pasted twice
        ("a: 1\nb: {token: x, token: y}\n", 'key "token" appears twice in one mapping (line 2)'),
        ("l:\n- {k: 1}\n- {k: 1, k: 2}\n", 'key "k" appears twice in one mapping (line 3)'),
    ],
    ids=["whole-file-twice", "nested", "in-a-list-item"],
)
def test_it_refuses_a_key_given_twice_as_kubectl_does(text: str | None, expected: str) -> None:
    """PyYAML would keep the last value silently, so the cluster registered here would not be
    the one kubectl (Go YAML, which refuses duplicates) sees."""
    assert expected in refused(text if text is not None else kubeconfig() + kubeconfig())


# --- things that would run programs or read files ------------------------------------------


@pytest.mark.parametrize(
    "user",
    [
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "touch"}},
        {"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/sh"}}},
        {"client-certificate": "/etc/passwd", "client-key": "/etc/shadow"},
        {"client-key": "/etc/shadow", "token": "x"},
        {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
        {"token-file": "/etc/passwd"},
    ],
)
def test_it_refuses_plugins_and_file_paths_in_the_user(user: dict[str, object]) -> None:
    message = refused(kubeconfig(user=user))
    assert 'users["test-user"].user.' in message
    assert "refused" in message


def test_it_refuses_a_file_path_for_the_ca() -> None:
    message = refused(kubeconfig(cluster={"certificate-authority": "/etc/ssl/ca.pem"}))
    assert (
        'clusters["test-cluster"].cluster.certificate-authority: file paths are refused' in message
    )


def test_it_refuses_plugins_even_in_entries_the_current_context_does_not_use() -> None:
    users = [
        {"name": "test-user", "user": {"token": SECRET_TOKEN}},
        {"name": "eks", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}},
    ]
    assert 'users["eks"].user.exec: exec plugins are refused' in refused(
        kubeconfig(extra={"users": users})
    )


def test_a_refused_exec_plugin_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "touch",
            "args": [str(marker)],
        }
    }
    refused(kubeconfig(user=user))
    with pytest.raises(KubeconfigError), api_client(kubeconfig(user=user), environment="simulated"):
        pass
    assert not marker.exists()


@pytest.mark.parametrize(
    ("cluster", "user", "expected"),
    [
        ({"proxy-url": "http://evil.example"}, None, '"proxy-url": not supported here'),
        (None, {"token": "x", "as": "system:admin"}, '"as": not supported here'),
        (None, {"token": "x", "username": "u", "password": "p"}, "more than one credential"),
        (None, {"client-certificate-data": b64(b"x")}, "must be given together"),
        (None, {"token": 12}, "token: must be a non-empty string"),
        (None, {"token": "a\r\nX-Injected: 1"}, "printable ASCII"),
        (None, {"username": "a:b", "password": "p"}, "must not contain ':'"),
    ],
)
def test_it_refuses_unsupported_or_contradictory_fields(
    cluster: dict[str, object] | None, user: dict[str, object] | None, expected: str
) -> None:
    assert expected in refused(kubeconfig(cluster=cluster, user=user))


# --- servers and TLS --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "environment", "expected"),
    [
        ("http://127.0.0.1:6443", "real", "http:// is refused for a real cluster"),
        ("http://gpu.example.com", "simulated", "only for a simulated cluster on a loopback"),
        ("http://10.0.0.1:6443", "simulated", "only for a simulated cluster on a loopback"),
        ("http://127.0.0.1.nip.io", "simulated", "only for a simulated cluster on a loopback"),
        ("ftp://127.0.0.1", "simulated", "must be an https:// URL"),
        ("127.0.0.1:6443", "simulated", "must be an https:// URL"),
        ("https://user:pw@gpu.example.com", "real", "credentials in the URL are refused"),
        ("https://gpu.example.com/?x=1", "real", "query or fragment"),
        ("https://gpu.example.com:99999", "real", "not a valid URL"),
        ("https://gpu.example.com/a b", "real", "not a valid URL"),
        ("https://169.254.169.254", "real", "link-local"),
    ],
)
def test_it_checks_the_server_url(server: str, environment: str, expected: str) -> None:
    assert expected in refused(https_kubeconfig(server), environment)


def test_it_allows_ipv6_loopback_and_localhost_over_http_for_simulated() -> None:
    for server in ("http://[::1]:8080", "http://localhost:8080", "http://127.9.9.9"):
        assert check_kubeconfig(kubeconfig(server=server), environment="simulated").info.server


def test_it_refuses_insecure_skip_tls_verify_for_real_only() -> None:
    text = kubeconfig(
        server="https://gpu.example.com:6443", cluster={"insecure-skip-tls-verify": True}
    )
    assert "insecure-skip-tls-verify: refused for a real cluster" in refused(text, "real")
    assert check_kubeconfig(text, environment="simulated").info.tls == "skip-verify"


def test_it_refuses_a_ca_that_is_not_a_certificate() -> None:
    assert "not valid base64" in refused(
        https_kubeconfig(cluster={"certificate-authority-data": "%%%"}), "real"
    )
    assert "not a PEM certificate" in refused(
        https_kubeconfig(cluster={"certificate-authority-data": b64(b"hello")}), "real"
    )


def test_it_refuses_a_client_key_that_is_not_a_key() -> None:
    user = client_certificate_user() | {"client-key-data": b64(pki().client_cert_pem)}
    assert "client-key-data: not an unencrypted PEM private key" in refused(
        https_kubeconfig(user=user), "real"
    )


def test_it_refuses_an_unknown_environment() -> None:
    assert "environment must be one of real, simulated" in refused(kubeconfig(), "staging")


# --- a real client built from it ---------------------------------------------------------------


@pytest.fixture
def version_server(request: pytest.FixtureRequest) -> Iterator[str]:
    with serve_version(tls=getattr(request, "param", False)) as url:
        yield url


def test_the_client_sends_the_token_to_a_loopback_http_server(version_server: str) -> None:
    with api_client(kubeconfig(server=version_server), environment="simulated") as api:
        version = k8s_client.VersionApi(api).get_code(_request_timeout=5)
    assert version.git_version == "v1.32.4"
    assert VersionHandler.seen_authorization == [f"Bearer {SECRET_TOKEN}"]


@pytest.mark.parametrize("version_server", [True], indirect=True)
def test_the_client_verifies_the_ca_and_presents_its_certificate_over_mtls(
    version_server: str,
) -> None:
    text = https_kubeconfig(version_server, user=client_certificate_user())
    with api_client(text, environment="real", policy=REAL_ON_LOOPBACK) as api:
        assert k8s_client.VersionApi(api).get_code(_request_timeout=5).git_version == "v1.32.4"
        key_file = api.configuration.key_file
        assert os.readlink(key_file).startswith("/memfd:aicr-kubeconfig")  # never on a disk
    assert not os.path.exists(key_file) or "aicr-kubeconfig" not in os.readlink(key_file)


@pytest.mark.parametrize("version_server", [True], indirect=True)
def test_the_client_refuses_a_server_the_ca_did_not_sign(version_server: str) -> None:
    other_ca = b64(pki().client_cert_pem)  # a certificate, but not the server's issuer
    text = https_kubeconfig(
        version_server,
        user=client_certificate_user(),
        cluster={"certificate-authority-data": other_ca},
    )
    with (
        api_client(text, environment="real", policy=REAL_ON_LOOPBACK) as api,
        pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        k8s_client.VersionApi(api).get_code(_request_timeout=5)
