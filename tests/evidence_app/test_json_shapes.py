"""The JSON columns hold exactly the shapes ``evidence_app.json_shapes`` declares.

Readers trust those TypedDicts instead of checking every level, so the writer (ingest) and the
declarations must not drift apart: each test ingests real evidence (AICR's example evidence
directory, signed keyless by the private Sigstore instance or with a registered key) and
compares the stored keys and value types with the declaration.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest

from evidence_app import json_shapes
from evidence_app.models import Evidence, TrustRoot, UploadLog
from evidence_app.services import keys
from recipes_app.models import Recipe
from tests.evidence_factories import (
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_statement,
    signed_example_tarball,
)
from tests.sigstore_private import PrivateSigstore, generate_key, public_pem, sign_dsse_with_key


def _problems(value: object, annotation: Any, path: str = "") -> list[str]:
    """Where decoded JSON ``value`` does not fit ``annotation``, as far as JSON can tell."""
    if isinstance(annotation, typing.TypeAliasType):
        return _problems(value, annotation.__value__, path)
    origin = get_origin(annotation)
    if typing.is_typeddict(annotation):
        return _typeddict_problems(value, annotation, path or annotation.__name__)
    if origin is list:
        (item,) = get_args(annotation)
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        return [p for i, v in enumerate(value) for p in _problems(v, item, f"{path}[{i}]")]
    if origin is dict:
        key, item = get_args(annotation)
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not an object"]
        return [
            p
            for k, v in value.items()
            for p in _problems(k, key, f"{path} key") + _problems(v, item, f"{path}.{k}")
        ]
    if origin in (types.UnionType, typing.Union):
        fits = any(not _problems(value, option) for option in get_args(annotation))
    elif origin is Literal:
        fits = value in get_args(annotation)
    elif annotation is object:
        fits = True
    elif annotation is type(None):
        fits = value is None
    elif annotation is float:
        fits = isinstance(value, int | float) and not isinstance(value, bool)
    elif annotation in (str, bool, int):
        fits = type(value) is annotation
    else:
        raise AssertionError(f"no JSON reading for {annotation!r}")
    return [] if fits else [f"{path}: {value!r} is not {annotation}"]


def _typeddict_problems(value: object, shape: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: {value!r} is not an object"]
    hints = get_type_hints(shape)
    problems = [f"{path}.{k}: missing" for k in sorted(shape.__required_keys__ - set(value))]
    problems += [f"{path}.{k}: not declared" for k in sorted(set(value) - set(hints))]
    for k in sorted(set(value) & set(hints)):
        problems += _problems(value[k], hints[k], f"{path}.{k}")
    return problems


@pytest.fixture
def keyless_tarball(private_sigstore: PrivateSigstore) -> bytes:
    bundle = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    return signed_example_tarball(bundle)


def test_it_stores_keyless_tarball_evidence_in_the_declared_shapes(
    ingest: Any, private_root: TrustRoot, example_recipe: Recipe, keyless_tarball: bytes
) -> None:
    result = ingest(keyless_tarball, filename="evidence.tar.gz")
    assert result.verdict == "verified", result.reason
    evidence = Evidence.objects.get()

    assert evidence.check_results, "the example directory carries CTRF reports"
    assert _problems(evidence.check_results, json_shapes.CheckResults, "check_results") == []
    assert _problems(evidence.certificate, json_shapes.KeylessCertificate, "certificate") == []
    assert _problems(evidence.transcript, json_shapes.Transcript, "transcript") == []
    assert _problems(evidence.verify_commands, list[json_shapes.StoredCommand], "commands") == []
    assert _problems(evidence.predicate, json_shapes.Predicate, "predicate") == []
    assert _problems(UploadLog.objects.get().transcript, json_shapes.Transcript, "log") == []


def test_it_stores_key_signed_evidence_in_the_declared_shapes(
    ingest: Any, example_recipe: Recipe
) -> None:
    key = generate_key("ecdsa-p256")
    keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))

    result = ingest(signed_example_tarball(sign_dsse_with_key(example_statement(), key)))

    assert result.verdict == "verified", result.reason
    evidence = Evidence.objects.get()
    assert _problems(evidence.certificate, json_shapes.KeyCertificate, "certificate") == []


def test_it_names_what_does_not_fit_a_declared_shape() -> None:
    """The checker itself can fail: a stored row that drifted is reported field by field."""
    drifted = {"step": "parse", "ok": "yes", "extra": 1}

    assert _problems([drifted], json_shapes.Transcript, "transcript") == [
        "transcript[0].detail: missing",
        "transcript[0].extra: not declared",
        "transcript[0].ok: 'yes' is not <class 'bool'>",
    ]
