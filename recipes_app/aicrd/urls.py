"""aicrd's routes, mounted at the site root so AICR clients can use this site as their server."""

from __future__ import annotations

from django.urls import path

from recipes_app.aicrd import views

app_name = "aicrd"

urlpatterns = [
    path("v1/recipe", views.recipe, name="recipe"),
    path("v1/query", views.query, name="query"),
]
