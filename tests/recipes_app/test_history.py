"""A recipe's history page: checks by evidence records over time, cells with their numbers,
last counted pass and flakiness, cell permalinks, keyset paging, a fixed number of queries, and
hostile values from signed predicate text."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evidence_app.models import Evidence, SignerClass
from recipes_app import history
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory

pytestmark = pytest.mark.django_db

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"
DYNAMO = "h100-eks-ubuntu-inference-dynamo"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOSTILE = '<script>alert(1)</script><svg onload="alert(2)">"\'&amp;'


@pytest.fixture
def kubeflow(real_catalog: Catalog) -> Recipe:
    return Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)


def results(
    recipe: Recipe, status: str = "passed", *, bw: Any = 412.5, **overrides: str
) -> dict[str, Any]:
    """Check results as ingest stores them: every declared check ``status`` (or its override,
    keyed by check name with ``_`` for ``-``), the NCCL bandwidth ``bw`` GB/s."""
    out: dict[str, Any] = {}
    for phase, checks in recipe.checks.items():
        if phase == "readiness":
            continue
        out[phase] = {}
        for check in checks:
            name = check["name"]
            entry: dict[str, Any] = {"status": overrides.get(name.replace("-", "_"), status)}
            if phase == "performance":
                entry["metrics"] = [{"label": name, "value": bw, "unit": "GB/s"}]
            out[phase][name] = entry
    return out


def record(recipe: Recipe, days_ago: float, **kwargs: Any) -> Evidence:
    kwargs.setdefault("check_results", results(recipe))
    return EvidenceFactory(recipe=recipe, attested_at=NOW - timedelta(days=days_ago), **kwargs)


def history_url(name: str = KUBEFLOW, **query: str) -> str:
    url = reverse("recipes:history", args=[name])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def get(url: str) -> tuple[int, str]:
    response = Client().get(url)
    return response.status_code, response.content.decode()


def column_ids(page: str) -> list[int]:
    return [
        int(pk)
        for pk in re.findall(r'<th scope="col" class="hcol[^"]*" data-evidence="(\d+)"', page)
    ]


def cell(page: str, anchor: str) -> str:
    found = re.search(rf'<td id="{re.escape(anchor)}"[^>]*>.*?</td>', page)
    assert found is not None, anchor
    return found.group(0)


def row(page: str, phase: str, key: str) -> str:
    found = re.search(
        rf'<tr class="hrow" data-check="{phase}/{re.escape(key)}">.*?</tr>', page, re.S
    )
    assert found is not None, key
    return found.group(0)


def test_it_shows_each_record_as_a_column_newest_first_with_why_it_counts(kubeflow):
    counted = record(kubeflow, 3)
    reported = record(
        kubeflow, 2, signer=SignerFactory(counted=False, signer_class=SignerClass.REPORTED)
    )
    demo = record(kubeflow, 1, is_demo=True)
    simulated = record(kubeflow, 0.5, is_simulated=True)
    withdrawn = record(kubeflow, 0.25, withdrawn_at=NOW, withdrawal_reason="wrong cluster")

    status, page = get(history_url())

    assert status == 200
    assert column_ids(page) == [withdrawn.pk, simulated.pk, demo.pk, reported.pk, counted.pk]
    headers = dict(
        zip(
            column_ids(page),
            re.findall(r'<th scope="col" class="hcol.*?</th>', page, re.S),
            strict=True,
        )
    )
    assert "counted: allowlisted (community)" in headers[counted.pk]
    assert "not counted: not on the allowlist" in headers[reported.pk]
    assert "DEMO" in headers[demo.pk]
    assert "counted: allowlisted" in headers[demo.pk]  # demo evidence counts, and says DEMO
    assert "SIMULATED" in headers[simulated.pk]
    assert "not counted: simulated cluster" in headers[simulated.pk]
    assert "WITHDRAWN" in headers[withdrawn.pk]
    assert "not counted: withdrawn" in headers[withdrawn.pk]
    assert 'class="hcol hcol--withdrawn"' in headers[withdrawn.pk]
    assert "5 records, 2 counted" in html.unescape(re.sub(r"<[^>]+>", "", page))


def test_each_cell_has_the_status_in_words_and_the_numbers_against_the_threshold(kubeflow):
    good = record(kubeflow, 2, check_results=results(kubeflow, bw=412.5))
    low = record(
        kubeflow,
        1,
        check_results=results(kubeflow, bw=250, nccl_all_reduce_bw="failed", dra_support="skipped"),
    )

    _, page = get(history_url())

    ok = cell(page, f"c{good.pk}-nccl-all-reduce-bw")
    assert "cell--pass" in ok
    assert "✓ pass" in ok
    assert "412.5 GB/s" in ok
    assert "✕" not in ok
    bad = cell(page, f"c{low.pk}-nccl-all-reduce-bw")
    assert "cell--fail" in bad
    assert "✗ fail" in bad
    assert 'class="hc__n hc__n--below">✕ 250 GB/s' in bad
    assert "\u2013 not run" in cell(page, f"c{low.pk}-dra-support")
    perf = row(page, "performance", "nccl-all-reduce-bw")
    assert "nccl-all-reduce-bw &gt;= 300" in perf  # the recipe's declared threshold


def test_a_check_missing_from_a_run_says_no_result(kubeflow):
    partial = results(kubeflow)
    del partial["conformance"]["dra-support"]
    evidence = record(kubeflow, 1, check_results=partial)

    _, page = get(history_url())

    assert f'id="c{evidence.pk}-dra-support"' not in page
    no_result = (
        '<td class="hc hc--none"><span aria-hidden="true">○</span>'
        '<span class="sr-only">no result</span></td>'
    )
    assert no_result in row(page, "conformance", "dra-support")


@pytest.mark.parametrize("recent_scan", [history.RECENT_PASS_SCAN, 5])
def test_last_counted_pass_reads_every_record_not_only_the_shown_ones(
    kubeflow, monkeypatch, recent_scan
):
    # With a short first scan the pass is found by the second query, over every record.
    monkeypatch.setattr(history, "RECENT_PASS_SCAN", recent_scan)
    signer = SignerFactory()
    old_pass = record(kubeflow, 100, signer=signer)
    for day in range(history.COLUMNS_SHOWN + 5):
        record(kubeflow, 50 - day, signer=signer, check_results=results(kubeflow, "failed"))
    # A newer pass by a reported signer and by a simulated run does not count.
    uncounted = SignerFactory(counted=False, signer_class=SignerClass.REPORTED)
    record(kubeflow, 1, signer=uncounted)
    record(kubeflow, 0, is_simulated=True)

    _, page = get(history_url())

    assert old_pass.pk not in column_ids(page)
    at = old_pass.attested_at
    expected = f'last counted pass <time datetime="{at.isoformat()}">{at:%Y-%m-%d}</time>'
    assert expected in row(page, "deployment", "operator-health")


def test_a_check_that_never_passed_in_a_counted_run_says_so(kubeflow):
    record(kubeflow, 1, check_results=results(kubeflow, "failed"))

    _, page = get(history_url())

    assert "no counted pass yet" in row(page, "deployment", "operator-health")


def test_flaky_when_one_signers_runs_alternate_not_when_two_signers_disagree(kubeflow):
    lab, other = SignerFactory(label="flaky-lab"), SignerFactory(label="steady-lab")
    for day, status in enumerate(("passed", "failed", "passed")):
        record(
            kubeflow, 10 - day, signer=lab, check_results=results(kubeflow, operator_health=status)
        )
    # Two signers that disagree on expected-resources, each consistently: contested, not flaky.
    for day in range(3):
        record(
            kubeflow, 5 - day, signer=lab, check_results=results(kubeflow, operator_health="passed")
        )
        record(
            kubeflow,
            5 - day,
            signer=other,
            check_results=results(kubeflow, expected_resources="failed"),
        )

    _, page = get(history_url())

    flaky = row(page, "deployment", "operator-health")
    assert 'class="badge badge--flaky"' in flaky
    assert "flaky-lab: pass → fail → pass" in flaky
    assert "badge--flaky" not in row(page, "deployment", "expected-resources")


def test_a_cell_permalink_opens_the_page_holding_its_record_with_the_cell_highlighted(kubeflow):
    records = [record(kubeflow, 100 - day) for day in range(history.COLUMNS_SHOWN * 2 + 3)]
    oldest = records[0]
    newest = records[-1]

    status, page = get(history_url(cell=f"operator-health@{oldest.pk}"))

    assert status == 200
    assert oldest.pk in column_ids(page)
    target = cell(page, f"c{oldest.pk}-operator-health")
    assert "is-target" in target
    assert page.count("is-target") == 1
    assert f'href="?cell=operator-health@{oldest.pk}#c{oldest.pk}-operator-health"' in target
    # That record sits in the middle of its page: the newer ones are a link away.
    total, lead = len(records), history.CELL_LEAD
    assert column_ids(page)[lead] == oldest.pk
    assert column_ids(page)[0] == records[lead].pk
    assert f"Records {total - lead}\u2013{total} of {total}" in page
    assert 'href="?">Newest</a>' in page

    # A cell on the newest page opens the newest page.
    status, page = get(history_url(cell=f"operator-health@{newest.pk}"))
    assert status == 200
    assert column_ids(page)[0] == newest.pk
    assert "is-target" in cell(page, f"c{newest.pk}-operator-health")


def test_older_and_newer_pages_follow_the_records_without_gaps(kubeflow):
    records = [record(kubeflow, 100 - day) for day in range(history.COLUMNS_SHOWN * 2 + 3)]
    newest_first = [e.pk for e in reversed(records)]
    seen: list[int] = []
    url = history_url()
    pages = 0
    while url:
        status, page = get(url)
        assert status == 200
        seen += column_ids(page)
        pages += 1
        older = re.search(r'rel="next" href="\?from=(\d+)"', page)
        url = history_url(**{"from": older.group(1)}) if older else ""
    assert seen == newest_first
    assert pages == 3

    _, last = get(history_url(**{"from": str(newest_first[-3])}))
    newer = re.search(r'rel="prev" href="\?from=(\d+)"', last)
    assert newer is not None
    _, previous = get(history_url(**{"from": newer.group(1)}))
    assert column_ids(previous) == newest_first[-3 - history.COLUMNS_SHOWN : -3]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"cell": "nonsense"}, "cell: “nonsense” is not a cell"),
        ({"cell": "operator-health@999999"}, "cell: no verified evidence 999999"),
        ({"cell": "no-such-check@{pk}"}, "cell: no check “no-such-check”"),
        ({"from": "abc"}, "from: “abc” is not an evidence id"),
        ({"from": "999999"}, "from: no verified evidence 999999"),
        ({"from": "{other}"}, "from: no verified evidence {other}"),
    ],
)
def test_a_bad_cell_or_from_is_a_400_naming_it_and_the_newest_records_still_show(
    kubeflow, real_catalog, query, message
):
    evidence = record(kubeflow, 1)
    other = record(Recipe.objects.get(catalog=real_catalog, name=DYNAMO), 1)
    values = {k: v.format(pk=evidence.pk, other=other.pk) for k, v in query.items()}

    status, page = get(history_url(**values))

    assert status == 400
    assert message.format(other=other.pk) in html.unescape(page)
    assert column_ids(page) == [evidence.pk]


def test_an_unknown_recipe_is_a_404_page():
    status, page = get(history_url("no-such-recipe"))
    assert status == 404
    assert "No recipe named" in page


def test_the_number_of_queries_does_not_grow_with_the_records(kubeflow):
    def count(**query: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            response = Client().get(history_url(**query))
        assert response.status_code == 200
        return len(queries.captured_queries)

    signer = SignerFactory()
    first = record(kubeflow, 200, signer=signer)
    few = (count(), count(cell=f"operator-health@{first.pk}"), count(**{"from": str(first.pk)}))
    for day in range(history.COLUMNS_SHOWN * 3):
        record(kubeflow, 100 - day, signer=SignerFactory() if day % 2 else signer)
    many = (count(), count(cell=f"operator-health@{first.pk}"), count(**{"from": str(first.pk)}))
    assert many == few


def test_the_recipe_page_links_to_its_history(kubeflow):
    _, page = get(reverse("recipes:detail", args=[KUBEFLOW]))
    assert f'href="{history_url()}"' in page


# --- charts ---------------------------------------------------------------------------------


def chart(page: str, key: str) -> str:
    found = re.search(
        rf'<figure class="hchart" data-chart="{re.escape(key)}">.*?</figure>', page, re.S
    )
    assert found is not None, key
    return found.group(0)


def test_a_chart_per_performance_threshold_with_the_line_and_failing_points_marked(kubeflow):
    for day, bw in enumerate((350.0, 280.0, 420.0, 310.5)):
        record(kubeflow, 10 - day, check_results=results(kubeflow, bw=bw))
    # Reported and simulated runs are not plotted.
    record(
        kubeflow,
        1,
        signer=SignerFactory(counted=False, signer_class=SignerClass.REPORTED),
        check_results=results(kubeflow, bw=5.0),
    )
    record(kubeflow, 1, is_simulated=True, check_results=results(kubeflow, bw=6.0))

    _, page = get(history_url())

    figure = chart(page, "nccl-all-reduce-bw/nccl-all-reduce-bw")
    assert 'role="img"' in figure
    label = re.search(r'aria-label="([^"]*)"', figure)
    assert label is not None
    assert html.unescape(label.group(1)) == (
        "nccl-all-reduce-bw over 4 counted runs: latest 310.5 GB/s, lowest 280 GB/s, "
        "highest 420 GB/s; threshold >= 300, 1 below it."
    )
    assert "<title>" in figure
    assert figure.count('class="hchart__threshold"') == 1
    assert figure.count('<circle class="hchart__ok"') == 3
    assert figure.count('<path class="hchart__fail"') == 1  # a cross: a shape, not a colour
    assert "<details" in figure
    assert "280 GB/s</td><td>✕ below" in figure
    assert "<td>5 GB/s</td>" not in figure
    assert "<td>6 GB/s</td>" not in figure
    assert "<td>280 GB/s</td>" in figure


def test_the_inference_recipe_charts_its_throughput_floor_and_latency_ceiling(real_catalog):
    dynamo = Recipe.objects.get(catalog=real_catalog, name=DYNAMO)
    metrics = [
        {"label": "Inference throughput", "value": 108789.87, "unit": "tokens/sec"},
        {"label": "Inference TTFT p99", "value": 2500, "unit": "ms"},
    ]
    check_results = {"performance": {"inference-perf": {"status": "passed", "metrics": metrics}}}
    record(dynamo, 1, check_results=check_results)

    _, page = get(history_url(DYNAMO))

    # A floor and a ceiling; the model, concurrency and routing mode are settings, not lines.
    assert re.findall(r'data-chart="([^"]*)"', page) == [
        "inference-perf/inference-throughput",
        "inference-perf/inference-ttft-p99",
    ]
    assert "threshold &gt;= 50000" in chart(page, "inference-perf/inference-throughput")
    assert "threshold &lt;= 2000" in chart(page, "inference-perf/inference-ttft-p99")


def test_hostile_numbers_and_names_are_escaped_and_never_break_the_page(kubeflow):
    signer = SignerFactory(label=HOSTILE * 3)
    values: list[Any] = [1e308, -1e308, -5, 10**30, "412", True, None]
    for day, value in enumerate(values):
        record(kubeflow, 20 - day, signer=signer, check_results=results(kubeflow, bw=value))
    infinite = results(kubeflow)
    infinite["performance"]["nccl-all-reduce-bw"] = {
        "status": "passed",
        "stdout": ["nccl-all-reduce-bw: 1e999 GB/s"],  # float("1e999") is inf
    }
    record(kubeflow, 1, signer=signer, check_results=infinite)
    hostile = results(kubeflow)
    hostile["performance"]["nccl-all-reduce-bw"]["metrics"] = [
        {"label": HOSTILE, "value": 301, "unit": "<b>u</b>"}
    ]
    hostile["deployment"][HOSTILE] = {"status": HOSTILE, "message": HOSTILE}
    hostile["deployment"]["x" * 4096] = {"status": "passed"}
    record(
        kubeflow,
        0,
        signer=signer,
        check_results=hostile,
        withdrawn_at=NOW,
        withdrawal_reason=HOSTILE,
        aicr_version=HOSTILE[:100],
    )

    status, page = get(history_url())

    assert status == 200
    for raw in ("<script>", "<svg onload", "<b>u</b>"):
        assert raw not in page
    figure = chart(page, "nccl-all-reduce-bw/nccl-all-reduce-bw")
    coordinates = re.findall(r'\s(?:cx|cy|x1|x2|y1|y2|x|y)="([^"]*)"', figure)
    assert coordinates
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", c) for c in coordinates)
    assert "not a finite number" in figure
    assert "1e+308 GB/s" in figure
    assert "-1e+308 GB/s" in figure
    assert "1e+30 GB/s" in figure
    # An undeclared hostile name gets a hashed key, never the raw text in an id or a URL.
    keys = re.findall(r'data-check="deployment/([^"]*)"', page)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+|_[0-9a-f]{12}", key) for key in keys)
    assert sum(1 for key in keys if key.startswith("_")) == 2


def test_the_page_stays_under_100_kb_with_long_hostile_text_and_many_records(kubeflow):
    long_label = "L" * 190
    for day in range(history.COLUMNS_SHOWN + 10):
        check_results = results(kubeflow, "failed" if day % 3 else "passed", bw=300 + day)
        for n in range(history.EXTRA_ROWS_SHOWN + 5):
            check_results["conformance"][f"undeclared-{n}-" + "n" * 4000] = {
                "status": "failed",
                "message": "m" * 4096,
            }
        record(
            kubeflow,
            60 - day,
            signer=SignerFactory(label=long_label + str(day)),
            check_results=check_results,
            is_demo=day % 2 == 0,
            withdrawn_at=NOW if day % 5 == 0 else None,
            withdrawal_reason="r" * 1000 if day % 5 == 0 else "",
        )

    status, page = get(history_url())

    assert status == 200
    assert len(page.encode()) < 100_000, len(page.encode())
    assert len(column_ids(page)) == history.COLUMNS_SHOWN
    assert "5 more check names that this recipe does not declare" in page
