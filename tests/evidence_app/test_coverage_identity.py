"""Identity tuples read from snapshots, and compared without ever calling "unknown" a match."""

from __future__ import annotations

import yaml

from evidence_app.coverage.identity import compare, identity_from_fingerprint, identity_of
from tests.evidence_factories import example_statement
from tests.shared_data import MOCK_SNAPSHOT, SNAPSHOT_EXAMPLE


def test_it_reads_every_identity_aicrs_example_snapshot_records() -> None:
    identity = identity_of(yaml.safe_load(SNAPSHOT_EXAMPLE.read_text()))
    assert identity == {
        "k8s_version": "1.33.0",
        "os": "ubuntu",
        "os_version": "24.04",
        "kernel": "6.8.0-1015-aws",
        "gpu_model": None,
        "gpu_count": None,
        "driver": None,
        "gpu_operator": "v25.10.1",
        "dra_driver": "25.12.0",
        "node_image": None,
        "instance_type": None,
        "aicr_version": "v0.19.0-example",
    }


def test_it_has_no_aicr_version_for_a_snapshot_without_a_header() -> None:
    assert identity_of(yaml.safe_load(MOCK_SNAPSHOT.read_text()))["aicr_version"] is None


def test_it_reads_the_simulators_snapshot() -> None:
    from tests.k8s_sim.scenarios import HEALTHY
    from tests.k8s_sim.snapshot import build_snapshot

    identity = identity_of(build_snapshot(HEALTHY, agent_version="v0.19.0"))
    assert identity["k8s_version"] == "1.33.5"  # v1.33.5-eks-113cf36
    assert identity["gpu_operator"] == "v26.3.3"  # K8s.image
    assert identity["node_image"] == "Ubuntu 24.04.3 LTS"
    assert identity["gpu_model"] == "H100"
    assert identity["instance_type"] is not None
    assert "," in identity["instance_type"]
    assert identity["aicr_version"] == "v0.19.0"


def test_it_says_not_installed_only_when_the_snapshot_lists_components() -> None:
    listed = {"measurements": [{"type": "K8s", "subtypes": [{"subtype": "helm", "data": {}}]}]}
    assert identity_of(listed)["dra_driver"] == "not installed"
    assert identity_of({"measurements": []})["dra_driver"] is None


def test_it_reads_what_the_predicate_fingerprint_records() -> None:
    predicate = example_statement()["predicate"]
    identity = identity_from_fingerprint(predicate["fingerprint"], aicr_version="v0.19.0")
    assert identity["k8s_version"] == "1.33.0"
    assert identity["os"] == "ubuntu"
    assert identity["os_version"] == "24.04"
    assert identity["gpu_model"] is None  # "" in the example: not recorded
    assert identity["kernel"] is None


def test_it_keeps_recorded_on_one_side_apart_from_matches() -> None:
    mine = {"kernel": "6.8", "driver": "580", "os": "ubuntu", "gpu_model": None}
    theirs = {"kernel": "6.8", "driver": None, "os": "talos", "gpu_model": "H100"}
    c = compare(mine, theirs)
    assert c.matches == ["kernel"]
    assert c.differs == ["os"]
    assert c.not_recorded == ["driver"]
    assert c.not_in_snapshot == ["gpu_model"]
    assert "k8s_version" in c.neither
