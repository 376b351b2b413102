"""Cluster figures for docs/clusters.md: what checking a kubeconfig, encrypting it and testing
a connection cost, and how fast hostile kubeconfigs are refused.

No database, no Django (the Fernet keys are passed in): plain calls, timed with
``time.perf_counter`` over N repetitions; p50 / p95 / max in milliseconds. "Test connection" is
``validators_app.orchestrator.test_connection`` over a client built by
``validators_app.kubeconfig.api_client`` against the simulated cluster (tests/k8s_sim,
loopback HTTP) and against a loopback HTTPS server demanding a client certificate (mTLS).
Prints figures; asserts nothing.
Run: ``.venv/bin/python bench/clusters.py [--n 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.fernet import Fernet, MultiFernet

from tests.k8s_sim import SimulatedCluster
from tests.validators_app.kubeconfigs import (
    client_certificate_user,
    https_kubeconfig,
    kubeconfig,
    serve_version,
)
from validators_app import orchestrator
from validators_app.kubeconfig import (
    KubeconfigError,
    api_client,
    check_kubeconfig,
    server_policy,
)

# The live server listens on loopback, where a real cluster is only with the operator's say-so.
REAL_ON_LOOPBACK = server_policy("real", allowed_networks=("127.0.0.1/32",))


def timed(label: str, n: int, call: Callable[[], object]) -> None:
    call()  # warm up
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    print(
        f"{label:<58} n={n:<4} p50 {statistics.median(samples):8.3f} ms"
        f"  p95 {p95:8.3f} ms  max {samples[-1]:8.3f} ms"
    )


def refused(text: str | bytes) -> Callable[[], object]:
    def call() -> object:
        try:
            check_kubeconfig(text, environment="simulated")
        except KubeconfigError as exc:
            return exc
        raise AssertionError("accepted")

    return call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n

    token = kubeconfig()
    mtls = https_kubeconfig(user=client_certificate_user())
    print(f"kubeconfig sizes: token {len(token)} B, embedded CA + client certificate {len(mtls)} B")
    timed(
        "check_kubeconfig: token, loopback http",
        n,
        lambda: check_kubeconfig(token, environment="simulated"),
    )
    timed(
        "check_kubeconfig: https, embedded CA + client cert/key",
        n,
        lambda: check_kubeconfig(mtls, environment="real"),
    )

    bomb = "\n".join(
        ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"{c}: &{c} [{', '.join(['*' + chr(ord(c) - 1)] * 9)}]" for c in "bcdefghi"]
    )
    timed("refuse: billion-laughs bomb (aliases)", n, refused(bomb))
    timed("refuse: 10 MB file (size cap)", n, refused("#" + "x" * (10 * 1024 * 1024)))
    timed(
        "refuse: 30,000-node flow list (node cap)",
        max(n // 10, 5),
        refused("a: [" + ",".join(["1"] * 30_000) + "]"),
    )
    timed(
        "refuse: 256 KiB comment + exec plugin",
        max(n // 10, 5),
        refused("#" + "x" * 250_000 + "\n" + kubeconfig(user={"exec": {"command": "sh"}})),
    )

    keys = MultiFernet([Fernet(Fernet.generate_key()), Fernet(Fernet.generate_key())])
    token_ciphertext = keys.encrypt(mtls.encode())
    timed("Fernet encrypt (mTLS kubeconfig)", n, lambda: keys.encrypt(mtls.encode()))
    timed("Fernet decrypt (mTLS kubeconfig)", n, lambda: keys.decrypt(token_ciphertext))
    timed(
        "Fernet rotate (re-encrypt under a new first key)", n, lambda: keys.rotate(token_ciphertext)
    )

    with SimulatedCluster("healthy-h100-eks") as cluster:
        text = cluster.kubeconfig

        def sim_test() -> object:
            with api_client(text, environment="simulated") as api:
                result = orchestrator.test_connection(api, timeout_s=5)
            assert result.ok, result.detail
            return result

        timed("test connection: simulator (new client each time)", n, sim_test)
    with serve_version(tls=True) as url:
        mtls_live = https_kubeconfig(url, user=client_certificate_user())

        def tls_test() -> object:
            with api_client(mtls_live, environment="real", policy=REAL_ON_LOOPBACK) as api:
                result = orchestrator.test_connection(api, timeout_s=5)
            assert result.ok, result.detail
            return result

        timed("test connection: loopback https + mTLS (new client)", n, tls_test)
    with SimulatedCluster("unreachable") as cluster:
        unreachable = cluster.kubeconfig

        def refused_test() -> object:
            with api_client(unreachable, environment="simulated") as api:
                return orchestrator.test_connection(api, timeout_s=5)

        timed("test connection: closed port (connection refused)", max(n // 10, 5), refused_test)


if __name__ == "__main__":
    main()
