"""Bundle parsing: limits, malformed JSON, media types, and the transcript type."""

from __future__ import annotations

import json

import pytest

from evidence_app.verification import BundleError, Transcript, parse_bundle, verify_signature
from tests.shared_data import SHARED

HAPPY = (SHARED / "fixtures/sigstore/keyless-dsse-happy/bundle.sigstore.json").read_bytes()
V01 = (SHARED / "fixtures/sigstore/keyless-msgsig-happy-v0.1/bundle.sigstore.json").read_bytes()
KEYED = (SHARED / "fixtures/sigstore/key-dsse-ecdsa-p256/bundle.sigstore.json").read_bytes()


def _doc(raw: bytes = HAPPY) -> dict:
    return json.loads(raw)


def test_it_describes_a_keyless_dsse_bundle() -> None:
    parsed = parse_bundle(HAPPY)
    assert (parsed.version, parsed.content, parsed.material) == ("0.3", "dsse", "certificate")
    assert parsed.payload_type == "application/vnd.in-toto+json"
    assert parsed.payload
    assert parsed.certificate_der
    assert [e.kind_version for e in parsed.tlog_entries] == ["dsse/0.0.1"]
    assert parsed.tlog_entries[0].log_index is not None


def test_it_describes_v01_message_signatures_and_key_bundles() -> None:
    old = parse_bundle(V01)
    assert (old.version, old.content, old.material) == ("0.1", "message_signature", "x509_chain")
    assert old.message_signature
    keyed = parse_bundle(KEYED)
    assert (keyed.material, keyed.public_key_hint is not None, keyed.tlog_entries) == (
        "public_key",
        True,
        (),
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (HAPPY[: len(HAPPY) // 2], "not valid JSON"),
        (b"", "empty"),
        (b"[1, 2]", "not a JSON object"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"a": NaN}', "non-standard number"),
        (b'{"a": ' + b"9" * 100 + b"}", "number literal"),
        (b'{"a": 1e999}', "out of range"),
        (b'{"a": 1, "a": 2}', "duplicate key"),
        (b"[" * 65 + b"]" * 65, "nesting deeper than 64"),
        (b"[" * 5000 + b"]" * 5000, "nesting deeper than 64"),
        (b"{" + b",".join(b'"k%d": 0' % i for i in range(300)) + b"}", "300 keys"),
        (b'{"mediaType": "' + b"x" * 1_000_001 + b'"}', "exceeds the limit"),
    ],
    ids=[
        "truncated",
        "empty",
        "array",
        "not-utf8",
        "nan",
        "huge-number",
        "float-overflow",
        "duplicate-key",
        "depth-65",
        "depth-5000",
        "many-keys",
        "oversized",
    ],
)
def test_it_rejects_malformed_documents_with_a_clear_error(raw: bytes, message: str) -> None:
    with pytest.raises(BundleError, match=message) as info:
        parse_bundle(raw)
    assert not info.value.unsupported
    outcome = verify_signature(raw, public_keys=[])
    assert (outcome.status, outcome.step) == ("invalid", "parse")


def test_it_accepts_nesting_up_to_the_limit() -> None:
    with pytest.raises(BundleError, match="mediaType"):
        parse_bundle(b'{"x": ' + b"[" * 63 + b"]" * 63 + b"}")


@pytest.mark.parametrize(
    ("change", "message", "unsupported"),
    [
        (lambda d: d.__setitem__("mediaType", "application/json"), "not a Sigstore bundle", False),
        (lambda d: d.pop("mediaType"), "missing", False),
        (
            lambda d: d.__setitem__("mediaType", "application/vnd.dev.sigstore.bundle.v0.4+json"),
            "not a supported bundle version",
            True,
        ),
        (lambda d: d.__setitem__("mediaType", 3), "expected a string", False),
        (lambda d: d.pop("verificationMaterial"), "verificationMaterial", False),
        (lambda d: d["verificationMaterial"].pop("certificate"), "no certificate", False),
        (
            lambda d: d["verificationMaterial"]["certificate"].__setitem__("rawBytes", "!!"),
            "certificate.rawBytes: not valid base64",
            False,
        ),
        (lambda d: d.pop("dsseEnvelope"), "nothing is signed", False),
        (lambda d: d.__setitem__("messageSignature", {"signature": ""}), "exactly one", False),
        (lambda d: d["dsseEnvelope"].__setitem__("signatures", []), "no signatures", False),
        (lambda d: d["dsseEnvelope"].__setitem__("payload", 5), "dsseEnvelope.payload", False),
        (
            lambda d: d["verificationMaterial"]["tlogEntries"][0].__setitem__("logIndex", "x"),
            "logIndex",
            False,
        ),
    ],
    ids=[
        "other-media-type",
        "no-media-type",
        "future-version",
        "media-type-number",
        "no-material",
        "no-certificate",
        "bad-base64",
        "no-content",
        "two-contents",
        "no-signatures",
        "payload-number",
        "bad-log-index",
    ],
)
def test_it_names_what_is_wrong(change, message: str, unsupported: bool) -> None:
    doc = _doc()
    change(doc)
    with pytest.raises(BundleError, match=message) as info:
        parse_bundle(json.dumps(doc))
    assert info.value.unsupported is unsupported


def test_it_reports_legacy_cosign_bundles_as_unsupported() -> None:
    legacy = json.dumps(
        {"base64Signature": "AAAA", "cert": "AAAA", "rekorBundle": {"SignedEntryTimestamp": "x"}}
    )
    with pytest.raises(BundleError, match="legacy cosign bundle") as info:
        parse_bundle(legacy)
    assert info.value.unsupported
    assert verify_signature(legacy.encode(), public_keys=[]).status == "unsupported"


def test_it_accepts_every_v01_to_v03_media_type() -> None:
    for media_type in (
        "application/vnd.dev.sigstore.bundle+json;version=0.2",
        "application/vnd.dev.sigstore.bundle+json;version=0.3",
        "application/vnd.dev.sigstore.bundle.v0.3+json",
    ):
        doc = _doc()
        doc["mediaType"] = media_type
        assert parse_bundle(json.dumps(doc)).media_type == media_type


def test_it_records_transcript_steps_in_order() -> None:
    transcript = Transcript()
    transcript.ok_step("parse", "bundle v0.3")
    transcript.ok_step("signature", "ok\nwith a newline")
    assert transcript.ok
    assert transcript.passed("signature")
    with pytest.raises(ValueError, match="out of order"):
        transcript.ok_step("parse")
    transcript.fail("statement", "predicateType: not AICR")
    with pytest.raises(ValueError, match="after failed step"):
        transcript.ok_step("manifest")
    assert not transcript.ok
    assert transcript.failed_step is not None
    assert transcript.failed_step.step == "statement"
    rows = transcript.to_list()
    assert rows[1] == {"step": "signature", "ok": True, "detail": "ok with a newline"}
    assert Transcript.from_list(rows).to_list() == rows
    with pytest.raises(ValueError, match="unknown"):
        Transcript().record("sign", True)
