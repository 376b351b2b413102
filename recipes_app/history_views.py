"""The history page of a recipe (``/recipes/<name>/history/``): thin, the reads are in
``recipes_app.history``. Recipes and their evidence are public: no per-object permission."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from recipes_app import history, selectors


@require_safe
def recipe_history(request: HttpRequest, name: str) -> HttpResponse:
    recipe = history.history_recipe(name=name)
    if recipe is None:
        context = {"name": name, "catalogs": selectors.catalogs_containing(name=name)}
        return render(request, "recipes_app/not_found.html", context, status=404)
    page = history.recipe_history(
        recipe=recipe, start=request.GET.get("from"), cell=request.GET.get("cell")
    )
    status = 400 if page.errors else 200
    return render(request, "recipes_app/history.html", {"history": page}, status=status)
