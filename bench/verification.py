"""Verification throughput: bundles per second per core, product path vs the bare libraries.

Measured on the Sigstore fixtures in tests/data/fixtures/sigstore/ and on AICR recipe
evidence signed by a private test instance (tests/sigstore_private.py):

* keyless DSSE: ``verify_signature`` + ``parse_statement`` (the product path: bounded bundle
  parse, pre-checks, exact identity + issuer policy, sigstore verification, claims, statement)
  vs ``Verifier.verify_dsse`` alone on an already parsed ``Bundle`` and vs
  ``Bundle.from_json`` + ``verify_dsse``;
* key-signed DSSE: ``verify_signature`` + ``parse_statement`` vs ``cryptography`` alone (PAE +
  one signature verification with an already loaded key).

One process, one thread: the figures are per core (best of 7 interleaved rounds, to damp
background load). Prints figures; asserts nothing.
Run: ``.venv/bin/python bench/verification.py [seconds per measurement]``.
"""

from __future__ import annotations

import base64
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519  # noqa: E402
from sigstore.models import Bundle  # noqa: E402
from sigstore.verify import policy  # noqa: E402

from evidence_app.verification import (  # noqa: E402
    StatementError,
    load_trust_root,
    parse_statement,
    production_root,
    verify_signature,
)
from evidence_app.verification.keyed import pae  # noqa: E402
from evidence_app.verification.trust import load_trust_root_file  # noqa: E402

FIXTURES = REPO / "tests" / "data" / "fixtures" / "sigstore"
GOLDEN_STATEMENT = (
    REPO
    / "tests/data/aicr/golden/generated/evidence-example-full/summary-bundle/statement.intoto.json"
)
KEYLESS = [
    "keyless-dsse-happy",
    "keyless-gh-attestation-reusable-workflow",
    "keyless-rekor2-dsse-happy",
]
KEYED = ["key-dsse-ecdsa-p256", "key-dsse-ed25519"]


def rates(fns: list[Callable[[], object]], seconds: float, rounds: int = 7) -> list[float]:
    """Best-of-``rounds`` operations per second for each function, measured in interleaved
    rounds (so background load hits all of them alike); ~``seconds`` in total per function."""
    for fn in fns:
        for _ in range(5):
            fn()
    best = [0.0] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            n = 0
            start = time.perf_counter()
            deadline = start + seconds / rounds
            while True:
                fn()
                n += 1
                if time.perf_counter() >= deadline:
                    break
            best[i] = max(best[i], n / (time.perf_counter() - start))
    return best


def product(raw: bytes, **kwargs: object) -> Callable[[], object]:
    def run() -> object:
        outcome = verify_signature(raw, **kwargs)  # type: ignore[arg-type]
        assert outcome.ok, outcome.detail
        try:
            return parse_statement(outcome.payload, payload_type=outcome.payload_type)
        except StatementError:
            return None

    return run


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    print(f"python {platform.python_version()} on {platform.machine()}, {seconds:g} s each\n")
    rows: list[tuple[str, float, float, float | None]] = []

    for case in KEYLESS:
        d = FIXTURES / case
        expected = json.loads((d / "expected.json").read_text())
        root = (
            production_root()
            if expected["trusted_root"] == "production"
            else load_trust_root_file(d / "trusted_root.json", name=case)
        )
        raw = (d / "bundle.sigstore.json").read_bytes()
        pol = policy.AllOf(
            [policy.Identity(identity=expected["identity"], issuer=expected["issuer"])]
            + [getattr(policy, k)(v) for k, v in (expected.get("extra_policies") or {}).items()]
        )
        parsed = Bundle.from_json(raw)
        ours, bare, bare_parse = rates(
            [
                product(
                    raw,
                    trusted_root=root,
                    identity=expected["identity"],
                    issuer=expected["issuer"],
                    extra_policies=expected.get("extra_policies"),
                ),
                lambda r=root, b=parsed, p=pol: r.verifier.verify_dsse(b, p),
                lambda r=root, raw=raw, p=pol: r.verifier.verify_dsse(Bundle.from_json(raw), p),
            ],
            seconds,
        )
        rows.append((f"keyless {case}", ours, bare, bare_parse))

    # AICR evidence from a private instance: the statement step succeeds here.
    from tests.sigstore_private import GITHUB_ISSUER, PrivateSigstore

    instance = PrivateSigstore(name="bench.test")
    private = load_trust_root(instance.trusted_root_json(), name="bench")
    identity = "https://github.com/acme/aicr/.github/workflows/evidence.yaml@refs/heads/main"
    signed = instance.sign_dsse(GOLDEN_STATEMENT.read_bytes(), identity=identity)
    parsed = Bundle.from_json(signed.bundle)
    pol = policy.Identity(identity=identity, issuer=GITHUB_ISSUER)
    ours, bare, bare_parse = rates(
        [
            product(signed.bundle, trusted_root=private, issuer=GITHUB_ISSUER),
            lambda: private.verifier.verify_dsse(parsed, pol),
            lambda: private.verifier.verify_dsse(Bundle.from_json(signed.bundle), pol),
        ],
        seconds,
    )
    rows.append(("keyless private AICR evidence", ours, bare, bare_parse))

    for case in KEYED:
        d = FIXTURES / case
        raw = (d / "bundle.sigstore.json").read_bytes()
        pem = (d / "key.pub").read_bytes()
        key = serialization.load_pem_public_key(pem)
        env = json.loads(raw)["dsseEnvelope"]
        message = pae(env["payloadType"], base64.b64decode(env["payload"]))
        sig = base64.b64decode(env["signatures"][0]["sig"])
        if isinstance(key, ed25519.Ed25519PublicKey):
            bare_fn: Callable[[], object] = lambda: key.verify(sig, message)  # noqa: B023, E731
        else:
            assert isinstance(key, ec.EllipticCurvePublicKey)
            bare_fn = lambda: key.verify(sig, message, ec.ECDSA(hashes.SHA256()))  # noqa: B023, E731
        ours, bare = rates([product(raw, public_keys=[pem]), bare_fn], seconds)
        rows.append((f"key {case}", ours, bare, None))

    width = max(len(r[0]) for r in rows)
    print(
        f"{'bundle':<{width}}  {'product/s':>10}  {'bare/s':>10}  {'parse+bare/s':>12}  "
        "ratio  ratio(parse+bare)"
    )
    for name, ours, bare, bare_parse in rows:
        extra = f"{bare_parse:12.0f}" if bare_parse else f"{'-':>12}"
        ratio2 = f"{ours / bare_parse:17.2f}" if bare_parse else f"{'-':>17}"
        print(f"{name:<{width}}  {ours:10.0f}  {bare:10.0f}  {extra}  {ours / bare:5.2f}  {ratio2}")
    print(
        "\nproduct = verify_signature + parse_statement; bare = Verifier.verify_dsse on a parsed "
        "Bundle (keyless) or one cryptography verify (key); parse+bare = Bundle.from_json + "
        "verify_dsse; ratio = product / bare, ratio(parse+bare) = product / parse+bare."
    )


if __name__ == "__main__":
    main()
