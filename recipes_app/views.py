"""The recipe pages: a filterable list (htmx-aware) and one recipe's detail.

The list is one template with a named partial: an htmx request gets only what it swaps
(``list.html#results``), a history-restore request the full page. The recipe page has no
in-place update (its pickers are plain GET forms; htmx's 52 KB would put it over the page
budget): it loads its YAML from ``recipe_yaml`` when that section is opened. Recipes and
their evidence are public, so there is no per-object permission to check. The consensus (grid,
badges, filter) is read from ``evidence_app.consensus``.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url

from aicr_site.lib.htmx import HtmxHttpRequest, wants_partial
from evidence_app import consensus
from evidence_app.qualifications import qualification_listing
from recipes_app import badges, overview, selectors


@require_safe
def home(request: HtmxHttpRequest) -> HttpResponse:
    """The coverage matrix of the current catalog, with what changed lately."""
    context = {"overview": overview.coverage_overview()}
    return render(request, "recipes_app/home.html", context)


@require_safe
@vary_on_headers("HX-Request", "HX-Target", "HX-History-Restore-Request")
def recipe_list(request: HtmxHttpRequest) -> HttpResponse:
    listing = selectors.recipe_listing(params=request.GET, page_number=request.GET.get("page"))
    status = 400 if listing.errors else 200
    if wants_partial(request, target="results"):
        context = {
            "listing": listing,
            "page": listing.page,
            "oob_facets": True,
            **_consensus_choices(listing),
        }
        response = render(request, "recipes_app/list.html#results", context, status=status)
        # The address bar shows only the active filters, so a copied URL is short and exact.
        return push_url(response, request.path + listing.shareable_qs)
    context = {"listing": listing, "page": listing.page, **_consensus_choices(listing)}
    return render(request, "recipes_app/list.html", context, status=status)


def _consensus_choices(listing: selectors.RecipeListing) -> dict[str, object]:
    chosen = listing.query.get("consensus", "")
    return {
        "consensus_options": [
            (state, consensus.STATE_DESCRIPTIONS[state], state == chosen)
            for state in consensus.STATES
        ]
    }


@require_safe
def recipe_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    page = selectors.recipe_page(
        name=name, catalog_id=request.GET.get("catalog"), against=request.GET.get("against")
    )
    if page is None:
        context: dict[str, object] = {
            "name": name,
            "catalogs": selectors.catalogs_containing(name=name),
        }
        return render(request, "recipes_app/not_found.html", context, status=404)
    status = 400 if page.diff.is_error else 200
    context = {"page": page, "recipe": page.recipe}
    context["grid"] = consensus.consensus_grid(
        recipe=page.recipe, lens=request.GET.get("lens"), signers=request.GET.get("signers")
    )
    context["qualifications"] = qualification_listing(
        params={}, page_number=1, recipe=page.recipe.name
    )
    if page.is_current_catalog:
        badge_url = request.build_absolute_uri(reverse("badge", args=[name]))
        page_url = request.build_absolute_uri(reverse("recipes:detail", args=[name]))
        context["badge_url"] = badge_url
        context["badge_markdown"] = f"[![AICR consensus: {name}]({badge_url})]({page_url})"
    return render(request, "recipes_app/detail.html", context, status=status)


@require_safe
def recipe_yaml(request: HttpRequest, name: str) -> HttpResponse:
    """The recipe as ``aicr recipe`` prints it (deterministic YAML), as plain text: the recipe
    page's "Resolved recipe" section loads it when opened, and it can be fetched on its own.
    ``?catalog=`` picks an earlier catalog version, as on the recipe page."""
    recipe = selectors.recipe_get(name=name, catalog_id=request.GET.get("catalog"))
    if recipe is None:
        return HttpResponse(
            f"No recipe named {name!r} in that catalog version.\n",
            status=404,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(recipe.deterministic_yaml, content_type="text/plain; charset=utf-8")


@require_safe
def recipe_badge(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """The SVG badge of a current recipe; an unknown name gets a 404 badge saying so."""
    facts = badges.badge_facts(name=name)
    if facts is None:
        response = render(
            request, "recipes_app/badge_unknown.svg", content_type="image/svg+xml", status=404
        )
    else:
        response = render(
            request, "recipes_app/badge.svg", {"facts": facts}, content_type="image/svg+xml"
        )
    # Shown in other sites' READMEs: short-lived caches, so a state change shows within minutes.
    response["Cache-Control"] = "public, max-age=300"
    return response
