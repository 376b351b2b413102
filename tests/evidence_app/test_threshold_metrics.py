"""Which printed number a declared threshold is judged by (evidence page, history, charts).

AICR's dynamo recipes declare ``inference-perf``'s thresholds as ``inference-throughput`` and
``inference-ttft-p99`` (tests/data/aicr/recipes/overlays/h100-eks-ubuntu-inference-dynamo.yaml),
and the validator prints ``RESULT: Inference throughput: …`` and ``RESULT: Inference TTFT p99:
…``. Each threshold must be judged by its own number, never by another threshold's.
"""

from __future__ import annotations

from evidence_app.consensus.outcomes import Metric
from evidence_app.evidence_page import threshold_bound, threshold_checks

THROUGHPUT = Metric("Inference throughput", 108789.87, "tokens/sec")
TTFT = Metric("Inference TTFT p99", 2500.0, "ms")
DYNAMO_THRESHOLDS = [
    {"name": "inference-model", "value": "Qwen/Qwen3-8B"},
    {"name": "inference-throughput", "value": ">= 50000"},
    {"name": "inference-ttft-p99", "value": "<= 2000"},
]


def by_name(checks):
    return {c.name: (c.metric, c.meets) for c in checks}


def test_each_dynamo_threshold_is_judged_by_its_own_number():
    judged = by_name(threshold_checks("inference-perf", DYNAMO_THRESHOLDS, [THROUGHPUT, TTFT]))

    assert judged["inference-throughput"] == (THROUGHPUT, True)
    assert judged["inference-ttft-p99"] == (TTFT, False)  # 2500 ms is over the 2000 ms ceiling
    assert judged["inference-model"] == (None, None)


def test_one_printed_number_is_never_lent_to_a_threshold_it_does_not_name():
    # Only the throughput line was printed: the latency ceiling has no number, not 108789.87.
    judged = by_name(threshold_checks("inference-perf", DYNAMO_THRESHOLDS, [THROUGHPUT]))

    assert judged["inference-throughput"] == (THROUGHPUT, True)
    assert judged["inference-ttft-p99"] == (None, None)


def test_a_threshold_named_like_its_check_takes_the_checks_only_number():
    bandwidth = Metric("NCCL All Reduce bandwidth (nccl-all-reduce-bw)", 480.5, "GB/s")
    thresholds = [{"name": "nccl-all-reduce-bw", "value": ">= 450"}]

    judged = by_name(threshold_checks("nccl-all-reduce-bw", thresholds, [bandwidth]))

    assert judged["nccl-all-reduce-bw"] == (bandwidth, True)


def test_a_bare_value_is_a_setting_not_a_bound():
    # "256" (inference-concurrency-per-gpu) has no operator: nothing is judged "below" it, and
    # the history page draws no line for it (both read evidence_page.threshold_bound).
    thresholds = [{"name": "inference-concurrency-per-gpu", "value": "256"}]
    concurrency = Metric("Inference concurrency per GPU", 64.0, "")

    [judged] = threshold_checks("inference-perf", thresholds, [concurrency])

    assert (judged.numeric, judged.meets) == (False, None)
    assert threshold_bound("256") is None
    assert threshold_bound(">= 450") == (">=", 450.0)
    assert threshold_bound("<= 2000 ms") == ("<=", 2000.0)
