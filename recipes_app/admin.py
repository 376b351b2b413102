from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from recipes_app.models import Catalog, Recipe


class ReadOnlyAdmin(admin.ModelAdmin):
    """Catalog data comes only from `manage.py import_catalog`; the admin shows it."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Catalog)
class CatalogAdmin(ReadOnlyAdmin):
    list_display = ("id", "source", "aicr_version", "content_digest", "file_count", "imported_at")
    exclude = ("files",)


@admin.register(Recipe)
class RecipeAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "catalog",
        "service",
        "accelerator",
        "os",
        "intent",
        "platform",
        "change",
    )
    list_filter = ("catalog", "service", "accelerator", "intent", "change")
    search_fields = ("name", "search_text")
    exclude = ("deterministic_yaml", "canonical_yaml", "search_text")
