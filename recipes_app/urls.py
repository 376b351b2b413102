from __future__ import annotations

from django.urls import path

from recipes_app import history_views, views

app_name = "recipes"

urlpatterns = [
    path("", views.recipe_list, name="list"),
    path("<str:name>/", views.recipe_detail, name="detail"),
    path("<str:name>/history/", history_views.recipe_history, name="history"),
    path("<str:name>/recipe.yaml", views.recipe_yaml, name="yaml"),
]
