"""Which digest a predicate type is checked with; both digests of a recipe.yaml (no Django)."""

from __future__ import annotations

import pytest

from evidence_app.verification.digests import (
    DigestScheme,
    RecipeYamlError,
    recipe_yaml_digests,
    scheme_for,
)
from tests.evidence_factories import EXAMPLE_DIR

EXAMPLE_YAML = (EXAMPLE_DIR / "recipe.yaml").read_text()
# AICR-V1.md §2: the example bundle's own v1 subject digest, and the derived V3 digest.
EXAMPLE_LEGACY = "d9e062bf3b8ad57f8a069961f1a9b1dc1525b58c396d3bd0d0ce5683a719a604"
EXAMPLE_V3 = "7e1624a8f1aaeee2ae8b74197ad0ebb66f5f577da96c12e891c91c22536ae6a0"


def test_it_reproduces_both_digests_of_aicrs_example_recipe() -> None:
    digests = recipe_yaml_digests(EXAMPLE_YAML)

    assert (digests.legacy, digests.v3) == (EXAMPLE_LEGACY, EXAMPLE_V3)
    assert digests.under(DigestScheme.LEGACY) == EXAMPLE_LEGACY
    assert digests.under(DigestScheme.V3) == EXAMPLE_V3


def test_it_gives_the_same_v3_digest_whatever_aicr_version_stamped_the_recipe() -> None:
    assert "\n    version: dev\n" in EXAMPLE_YAML
    restamped = recipe_yaml_digests(
        EXAMPLE_YAML.replace("\n    version: dev\n", "\n    version: v1.0.0\n")
    )

    assert restamped.v3 == EXAMPLE_V3
    assert restamped.legacy != EXAMPLE_LEGACY


def test_it_keeps_apiversion_in_the_v3_digest() -> None:
    moved = recipe_yaml_digests(
        EXAMPLE_YAML.replace("apiVersion: aicr.run/v1alpha2", "apiVersion: aicr.run/v1", 1)
    )

    assert moved.v3.startswith("77a8252d")  # AICR-V1.md §2


@pytest.mark.parametrize(
    ("predicate_type", "scheme"),
    [
        ("https://aicr.run/recipe-evidence/v3", DigestScheme.V3),
        ("https://aicr.run/recipe-evidence/v1", DigestScheme.LEGACY),
        ("https://aicr.run/recipe-evidence/v2", DigestScheme.LEGACY),
        ("https://aicr.nvidia.com/recipe-evidence/v1", DigestScheme.LEGACY),
        # AICR dispatches on the exact URI: nothing that merely resembles v3 gets the V3 digest.
        ("https://aicr.run/recipe-evidence/v3/", DigestScheme.LEGACY),
        ("https://aicr.nvidia.com/recipe-evidence/v3", DigestScheme.LEGACY),
    ],
)
def test_it_dispatches_on_exactly_the_v3_uri(predicate_type: str, scheme: DigestScheme) -> None:
    assert scheme_for(predicate_type) is scheme


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        (b"\xff\xfe", "not UTF-8"),
        ("- a\n- b\n", "mapping at the top level"),
        ("a: [unclosed\n", "recipe.yaml"),
        ("a: 1\n---\nb: 2\n", "recipe.yaml"),
    ],
)
def test_it_refuses_what_is_not_a_recipe_document(text: str | bytes, message: str) -> None:
    with pytest.raises(RecipeYamlError, match=message):
        recipe_yaml_digests(text)
