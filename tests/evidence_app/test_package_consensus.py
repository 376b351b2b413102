"""``consensus.json`` of an audit package: the newest counted run of each (recipe, signer) by
time, and the runs read back one recipe at a time from where the package wrote them."""

from __future__ import annotations

from typing import Any

from evidence_app.consensus import package_consensus
from evidence_app.consensus.records import NewestCounted, package_consensus_of

DIGEST = "a" * 64
DECLARED = {DIGEST: {"deployment": [{"name": "operator-health", "thresholds": []}]}}


def run(pk: int, attested_at: str, status: str, *, signer: str = "s1", recipe: str = "r1") -> Any:
    return {
        "id": pk,
        "recipe": recipe,
        "recipe_digest": DIGEST,
        "signer_slug": signer,
        "attested_at": attested_at,
        "counted": True,
        "is_simulated": False,
        "is_demo": False,
        "stale_reasons": [],
        "checks": {"deployment": {"operator-health": status}},
    }


def test_the_newest_run_is_the_later_one_even_where_its_text_sorts_first() -> None:
    # isoformat drops a zero microsecond: as text "…:00Z" sorts after "…:00.500000Z".
    older = run(1, "2026-11-01T10:00:00Z", "passed")
    newer = run(2, "2026-11-01T10:00:00.500000Z", "failed")
    assert package_consensus([older, newer], DECLARED) == package_consensus([newer], DECLARED)
    assert package_consensus([older, newer], DECLARED) != package_consensus([older], DECLARED)
    # The same time: the higher id is the newer run, as the site orders them.
    tie = run(3, "2026-11-01T10:00:00.500000Z", "passed")
    assert package_consensus([tie, newer], DECLARED) == package_consensus([tie], DECLARED)


def test_the_kept_runs_are_read_back_once_each_one_recipe_at_a_time() -> None:
    records = [
        run(pk, f"2026-11-0{1 + pk % 5}T10:00:00Z", ("passed", "failed")[pk % 2], signer=signer)
        | {"recipe": recipe}
        for pk, (recipe, signer) in enumerate(
            (recipe, signer) for recipe in ("r1", "r2", "r3") for signer in ("s1", "s2", "s3")
        )
    ]
    records += [run(100 + i, "2026-10-01T00:00:00Z", "failed", signer="s1") for i in range(3)]
    newest = NewestCounted()
    for position, record in enumerate(records):
        newest.add(record, at=position)  # where the caller wrote it
    read: list[int] = []
    recipes_seen: list[str] = []

    def read_back(position: int) -> dict[str, Any]:
        record: dict[str, Any] = records[position]
        if not recipes_seen or recipes_seen[-1] != record["recipe"]:
            recipes_seen.append(record["recipe"])
        read.append(position)
        return record

    assert package_consensus_of(newest, read_back, DECLARED) == package_consensus(records, DECLARED)
    assert sorted(read) == sorted(set(read))  # each kept run read once
    assert len(read) == 9  # one per (recipe, signer): the older runs of s1 are not kept
    assert recipes_seen == ["r1", "r2", "r3"]  # one recipe's runs at a time
