"""One page of the qualifications table for the HTML pages (``/qualifications/`` and the
recipe page), with the filter choices and the links that keep the filters while sorting or
paging. A fixed number of queries whatever the page holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Exists, OuterRef
from django.db.models.expressions import RawSQL

from evidence_app.consensus import STATES
from evidence_app.models import Evidence, SignerClass, Verdict, counted_q
from evidence_app.services.signer_tallies import counted_total

from .filters import DEFAULT_SORT, SORTS, QualificationFilter
from .table import QualificationRow, qualification_queryset, qualification_rows

PAGE_SIZE = 25
# The recipe page shows the newest few (it carries the consensus grid too: the page budget);
# its "sort, filter and export" link opens the rest on /qualifications/.
RECIPE_PAGE_SIZE = 3  # the recipe page is the heaviest page (100 KB budget at 10,000 records)
_PARAMS = ("recipe", "gpu", "service", "signer_class", "state", "simulated", "sort")
_FILTERS = tuple(name for name in _PARAMS if name != "sort")


@dataclass(frozen=True)
class SortLink:
    name: str
    query: str  # the query string that sorts by this column (the other way when it is active)
    active: str  # "ascending", "descending" or ""


@dataclass
class QualificationListing:
    page: Page[Evidence]
    rows: list[QualificationRow]
    errors: list[str]
    params: dict[str, str]
    recipe_fixed: str
    choices: dict[str, list[str]] = field(default_factory=dict)
    simulated: int = 0  # the recipe page, when nothing counted: its verified simulated runs

    @property
    def query(self) -> str:
        """The active filters and sort, without the page: what page links append to."""
        return urlencode([(k, v) for k, v in self.params.items() if v])

    @property
    def sort_links(self) -> dict[str, SortLink]:
        current = self.params.get("sort") or DEFAULT_SORT
        out = {}
        for name in SORTS:
            active = ""
            if current == name:
                active, target = "ascending", f"-{name}"
            elif current == f"-{name}":
                active, target = "descending", name
            else:
                target = f"-{name}" if name == "date" else name
            params = {**self.params, "sort": target}
            out[name] = SortLink(name, urlencode([(k, v) for k, v in params.items() if v]), active)
        return out


# One evidence row per (recipe, GPU model) pair of verified, live rows, by a skip scan of
# ``evidence_recipe_gpu_idx``: each step one probe for the next pair (a few hundred pairs,
# whatever the number of records). PostgreSQL only (SQLite has no LATERAL).
_PAIRS_SQL = """
WITH RECURSIVE pairs (recipe_id, gpu_model, id) AS (
    (SELECT recipe_id, gpu_model, id FROM evidence_app_evidence
     WHERE verdict = %s AND withdrawn_at IS NULL ORDER BY recipe_id, gpu_model LIMIT 1)
    UNION ALL
    SELECT nxt.recipe_id, nxt.gpu_model, nxt.id FROM pairs, LATERAL (
        SELECT e.recipe_id, e.gpu_model, e.id FROM evidence_app_evidence AS e
        WHERE e.verdict = %s AND e.withdrawn_at IS NULL
          AND (e.recipe_id, e.gpu_model) > (pairs.recipe_id, pairs.gpu_model)
        ORDER BY e.recipe_id, e.gpu_model LIMIT 1
    ) AS nxt
)
SELECT id FROM pairs
"""


def _choices() -> dict[str, list[str]]:
    """The values the select boxes offer: what the rows hold (one query). On PostgreSQL the
    (recipe, GPU model) pairs come from a skip scan of an index, each kept when one row of it
    is in the table (an ``EXISTS`` that stops at its first row), instead of a ``DISTINCT`` over
    every counted record (0.9-1.8 s at 1,000,000; issue 22)."""
    base = qualification_queryset()
    if connection.vendor == "postgresql":
        in_table = base.filter(recipe_id=OuterRef("recipe_id"), gpu_model=OuterRef("gpu_model"))
        pairs = Evidence.objects.filter(
            # A constant statement, its one value bound as a parameter.
            Exists(in_table),
            pk__in=RawSQL(_PAIRS_SQL, [Verdict.VERIFIED] * 2),  # noqa: S611
        )
        triples = set(pairs.values_list("recipe_name", "gpu_model", "recipe__service"))
    else:
        triples = set(
            base.order_by().values_list("recipe_name", "gpu_model", "recipe__service").distinct()
        )
    return {
        "recipe": sorted({r for r, _g, _s in triples}),
        "gpu": sorted({g for _r, g, _s in triples if g}),
        "service": sorted({s for _r, _g, s in triples if s}),
        "signer_class": list(SignerClass.values),
        "state": list(STATES),
    }


def qualification_listing(
    *, params: Mapping[str, Any], page_number: Any, recipe: str = ""
) -> QualificationListing:
    """The rows ``params`` ask for; ``recipe`` fixes the recipe (the recipe page's table, which
    has no filter form: no choices, and the count of its simulated runs instead)."""
    data = {name: str(params.get(name) or "").strip() for name in _PARAMS}
    if recipe:
        data["recipe"] = recipe
    filterset = QualificationFilter(data=data, queryset=qualification_queryset())
    errors = [
        f"{name}: {message}"
        for name, messages in filterset.form.errors.items()
        for message in messages
    ]
    results = Evidence.objects.none() if errors else filterset.qs
    paginator = Paginator(results, RECIPE_PAGE_SIZE if recipe else PAGE_SIZE)
    cleaned = {} if errors else filterset.form.cleaned_data
    chosen = {name for name in _FILTERS if cleaned.get(name)}
    if not errors and not chosen:
        # Unfiltered, the rows are the counted records: their tallied number, instead of a
        # COUNT(*) joining every record to its signer (1.4 s at 1,000,000; issue 22).
        paginator.count = counted_total()
    elif chosen == {"recipe"}:
        paginator.count = recipe_counted(cleaned["recipe"])
    page = paginator.get_page(page_number)
    items = list(page.object_list)
    page.object_list = items
    return QualificationListing(
        page=page,
        rows=qualification_rows(items),
        errors=errors,
        params=data,
        recipe_fixed=recipe,
        choices={} if recipe else _choices(),
        simulated=_simulated_runs(recipe) if recipe and not page.paginator.count else 0,
    )


def recipe_counted(recipe: str) -> int:
    """The counted records of ``recipe``: the table's rows when only the recipe is chosen (the
    recipe page's). No tally holds them (a recipe's tallies count its withdrawn, simulated and
    other signers' records too), so they are counted from ``evidence_live_newest_aicr_idx``,
    which holds the recipe's live records with their version key and signer: an index-only
    count, each signer's ``counted`` from its row, instead of reading every record of the
    recipe to test the table's simulated-or-counted condition (170 ms at 1,000,000; issue
    22)."""
    return Evidence.objects.filter(counted_q(), recipe_name=recipe).count()


def _simulated_runs(recipe: str) -> int:
    return qualification_queryset().filter(recipe_name=recipe, is_simulated=True).count()
