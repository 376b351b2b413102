"""Declaring a release: the one check of what a maintainer sends (API, admin, command), and the
row it becomes. Bad input is a ``ReleaseInputError`` naming the field; nothing is stored then.

Images are pinned references, ``<repository>@sha256:<64 lowercase hex>``: a qualification
covers exact digests (AICR's policy), so a tag alone is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from evidence_app.coverage.recorded import TUPLE_KEYS, split_image
from evidence_app.models import Release
from recipes_app.models import Catalog, Recipe

from .stored import release_store

MAX_NAME = 200
MAX_IMAGE = 500
MAX_PROFILES = 200
MAX_VALIDATOR_IMAGES = 32
MAX_TUPLE_VALUE = 500
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_REPOSITORY = re.compile(r"[a-z0-9][a-z0-9._\-/:]*[a-z0-9]")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-+ ]*")
_FIELDS = ("name", "operator_image", "operator_chart", "aicr_image", "validator_images", "profiles")


class ReleaseInputError(ValueError):
    """The declaration is refused: ``field`` names what is wrong, the message says how."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def pinned_image(field: str, value: Any) -> str:
    """``value`` as ``repo@sha256:<64 hex>``, or ``ReleaseInputError`` naming ``field``."""
    if not isinstance(value, str) or not value.strip():
        raise ReleaseInputError(field, "an image reference repo@sha256:<64 hex> is required")
    ref = value.strip()
    if len(ref) > MAX_IMAGE:
        raise ReleaseInputError(field, f"at most {MAX_IMAGE} characters")
    repo, _sep, digest = ref.partition("@")
    if not _DIGEST.fullmatch(digest):
        raise ReleaseInputError(
            field, f"{ref[:100]!r} is not pinned: expected repo@sha256:<64 lowercase hex digits>"
        )
    repository, tag, _ = split_image(repo)
    if not _REPOSITORY.fullmatch(repository) or "//" in repository:
        raise ReleaseInputError(field, f"{repo[:100]!r} is not an image repository")
    # A tag beside the digest says nothing the digest does not: the digest is what is compared.
    del tag
    return f"{repository}@{digest}"


def _validator_images(value: Any, field: str = "validator_images") -> list[dict[str, str]]:
    """Images pinned by digest, ``[{"image": repo, "digest": "sha256:…"}]``, one per
    repository: the release's validator images, or a profile's workload images."""
    if not isinstance(value, list):
        raise ReleaseInputError(field, 'a list of {"image": repo, "digest": "sha256:…"}')
    if len(value) > MAX_VALIDATOR_IMAGES:
        raise ReleaseInputError(field, f"at most {MAX_VALIDATOR_IMAGES} images")
    out: dict[str, dict[str, str]] = {}
    for i, entry in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(entry, Mapping):
            raise ReleaseInputError(where, 'an object {"image": repo, "digest": "sha256:…"}')
        image, digest = entry.get("image"), entry.get("digest")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest.strip()):
            raise ReleaseInputError(f"{where}.digest", "expected sha256:<64 lowercase hex digits>")
        if not isinstance(image, str):
            raise ReleaseInputError(f"{where}.image", "an image repository is required")
        repository, _ = pinned_image(f"{where}.image", f"{image.strip()}@{digest.strip()}").split(
            "@", 1
        )
        if repository in out:
            raise ReleaseInputError(f"{where}.image", f"{repository} is listed twice")
        out[repository] = {"image": repository, "digest": digest.strip()}
    return [out[k] for k in sorted(out)]


def _tuple(where: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ReleaseInputError(where, "an object {identity: value}")
    out = {}
    for key, item in value.items():
        if key not in TUPLE_KEYS:
            raise ReleaseInputError(
                f"{where}.{str(key)[:60]}",
                f"not an identity of the tuple (known: {', '.join(TUPLE_KEYS)})",
            )
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_TUPLE_VALUE:
            raise ReleaseInputError(
                f"{where}.{key}", f"a non-empty text of at most {MAX_TUPLE_VALUE} characters"
            )
        out[key] = item.strip()
    return out


def _profiles(value: Any) -> list[dict[str, Any]]:
    field = "profiles"
    if not isinstance(value, list) or not value:
        raise ReleaseInputError(field, "a non-empty list of recipe names")
    if len(value) > MAX_PROFILES:
        raise ReleaseInputError(field, f"at most {MAX_PROFILES} profiles")
    catalog = Catalog.objects.current()
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(value):
        where = f"{field}[{i}]"
        tuple_: dict[str, str] = {}
        workloads: list[dict[str, str]] = []
        if isinstance(entry, Mapping):
            tuple_ = _tuple(f"{where}.tuple", entry.get("tuple"))
            if entry.get("workload_images") is not None:
                workloads = _validator_images(
                    entry.get("workload_images"), f"{where}.workload_images"
                )
            entry = entry.get("recipe")
            where = f"{where}.recipe"
        if not isinstance(entry, str) or not entry.strip():
            raise ReleaseInputError(where, "a recipe name is required")
        name = entry.strip()
        if name in out:
            raise ReleaseInputError(where, f"{name[:100]} is claimed twice")
        if catalog is None or not Recipe.objects.filter(catalog=catalog, name=name).exists():
            raise ReleaseInputError(where, f"{name[:100]!r} is not a recipe of the current catalog")
        out[name] = {"recipe": name, "tuple": tuple_}
        if workloads:
            # The workload images the profile's runs must record (AICR's tuple: "workload
            # image"), each compared by its repository's digest like the validator images.
            out[name]["workload_images"] = workloads
    return list(out.values())


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ReleaseInputError("name", "a release name is required")
    name = value.strip()
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        raise ReleaseInputError(
            "name", f"at most {MAX_NAME} letters, digits, spaces and . _ - + (starting with one)"
        )
    return name


def release_fields(data: Any) -> dict[str, Any]:
    """The checked fields of a declaration (``ReleaseInputError`` for the first problem)."""
    if not isinstance(data, Mapping):
        raise ReleaseInputError("body", "a JSON object is required")
    unknown = sorted(str(k) for k in data if k not in _FIELDS)
    if unknown:
        raise ReleaseInputError(unknown[0][:60], f"not a field (fields: {', '.join(_FIELDS)})")
    return {
        "name": _name(data.get("name")),
        "operator_image": pinned_image("operator_image", data.get("operator_image")),
        "operator_chart": pinned_image("operator_chart", data.get("operator_chart")),
        "aicr_image": pinned_image("aicr_image", data.get("aicr_image")),
        "validator_images": _validator_images(data.get("validator_images", [])),
        "profiles": _profiles(data.get("profiles")),
    }


def release_declare(data: Any, *, by: Any = None) -> Release:
    """Check and store a release and its profiles' statuses (``releases.stored``, under the
    locks of the evidence changes that refresh them); ``ReleaseInputError`` (nothing stored)
    when refused."""
    from evidence_app.consensus.stored import lock_names  # it imports releases.stored

    fields = release_fields(data)
    try:
        with transaction.atomic():
            release = Release.objects.create(
                created_by=by if getattr(by, "is_authenticated", False) else None, **fields
            )
            lock_names(release.claimed)
            release_store(release, Catalog.objects.current())
            return release
    except IntegrityError:
        raise ReleaseInputError("name", f"a release named {fields['name']!r} exists") from None
