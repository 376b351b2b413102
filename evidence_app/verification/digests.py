"""Which recipe digest an AICR evidence record is checked with, in one place.

AICR has two recipe digest algorithms (AICR-V1.md §2). The *legacy* digest (recipe-evidence
v1, v2 and the legacy ``aicr.nvidia.com`` v1) is sha256 of the canonical re-emit of
``recipe.yaml``; the *V3* digest (recipe-evidence v3) is the same after leaving out the
top-level ``metadata.version``, so the same recipe content resolved by an ``aicr`` binary of
another version keeps its digest. AICR dispatches on the predicate type being exactly the v3
URI; anything else gets the legacy digest, so this does too.

Django-free (staleness and bind in the Django app import it; so does the verification
pipeline). The canonical form itself lives in ``recipes_app.resolver`` (also Django-free).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from recipes_app.resolver import CatalogError, recipe_digest, recipe_digest_v3
from recipes_app.resolver.yamlload import Ctx, as_any, parse_raw

PREDICATE_V3 = "https://aicr.run/recipe-evidence/v3"


class DigestScheme(enum.StrEnum):
    LEGACY = "legacy"
    V3 = "v3"

    @property
    def label(self) -> str:
        """How the site names the scheme to people (bind transcript, recipe page)."""
        return _LABELS[self]


_LABELS = {
    DigestScheme.LEGACY: "legacy digest",
    DigestScheme.V3: "V3 digest (metadata.version excluded)",
}


def scheme_for(predicate_type: str) -> DigestScheme:
    """The digest scheme a record of ``predicate_type`` was signed with: V3 for exactly the v3
    URI (AICR's own dispatch), legacy for everything else."""
    return DigestScheme.V3 if predicate_type == PREDICATE_V3 else DigestScheme.LEGACY


class RecipeYamlError(ValueError):
    """``recipe.yaml`` cannot be read as a recipe document (no digest can be computed)."""


@dataclass(frozen=True)
class RecipeDigests:
    """Both digests of one recipe document (lowercase hex)."""

    legacy: str
    v3: str

    def under(self, scheme: DigestScheme) -> str:
        return self.v3 if scheme is DigestScheme.V3 else self.legacy


def recipe_yaml_digests(text: str | bytes, *, path: str = "recipe.yaml") -> RecipeDigests:
    """The legacy and V3 digests of a ``recipe.yaml`` text, parsed with yaml.v3 semantics by
    the resolver's bounded loader (hostile input raises ``RecipeYamlError``)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise RecipeYamlError(f"{path}: not UTF-8") from None
    if not text.strip():
        raise RecipeYamlError(f"{path}: empty (AICR refuses to digest an empty recipe)")
    try:
        doc = as_any(parse_raw(text, path), Ctx(path))
    except CatalogError as exc:
        raise RecipeYamlError(str(exc)) from None
    if not isinstance(doc, dict):
        raise RecipeYamlError(f"{path}: expected a mapping at the top level")
    try:
        return RecipeDigests(legacy=recipe_digest(doc), v3=recipe_digest_v3(doc))
    except (TypeError, ValueError) as exc:
        # A document the loader accepts but the canonical emitter cannot write (AICR's
        # canonicaliser would fail on it too): no digest, not a crash.
        raise RecipeYamlError(f"{path}: cannot be canonicalised ({exc})") from None
