"""Maintainers' admin for clusters: registered, re-keyed and re-scheduled through
``services.clusters``; the kubeconfig and the HF token are write-only fields (never rendered
back, not even on the change form)."""

from __future__ import annotations

import functools
from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters

from evidence_app import permissions
from evidence_app.models import Role
from validators_app.crypto import KeyUnavailable
from validators_app.forms import SETTINGS_FIELDS, ClusterSettingsForm
from validators_app.kubeconfig import MAX_KUBECONFIG_BYTES
from validators_app.models import Cluster
from validators_app.services import clusters


def _is_maintainer(request: HttpRequest) -> bool:
    return Role.MAINTAINER in permissions.roles_of(request.user)


class ClusterAddForm(ClusterSettingsForm, forms.ModelForm):
    """Registers through the service from ``clean()``: that way every refusal, including a
    name taken a moment ago or a missing encryption key, is a form error, never a 500."""

    kubeconfig = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14, "cols": 100, "autocomplete": "off"}),
        strip=False,
        max_length=MAX_KUBECONFIG_BYTES,
        help_text="Embedded credentials only (token, client-certificate-data + client-key-data, "
        "or username/password). Stored encrypted; never shown again.",
    )

    class Meta:
        model = Cluster
        fields = ["name", "environment"]

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.registered: Cluster | None = None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not self.errors:
            try:
                self.registered = clusters.cluster_register(
                    name=data["name"],
                    kubeconfig_text=data["kubeconfig"],
                    environment=data["environment"],
                    by=self.user,
                    settings=self.settings_from(data),
                )
            except clusters.ClusterRegistrationError as exc:
                self.add_service_error(exc)
            except KeyUnavailable as exc:
                self.add_error(None, str(exc))
        return data

    def validate_unique(self) -> None:
        pass  # the service checked the name (backed by the unique constraint)


class ClusterChangeForm(ClusterSettingsForm, forms.ModelForm):
    """Renames, re-keys and re-schedules through the service from ``clean()`` (see
    ``ClusterAddForm``): every setting is checked before anything is stored, and the rename
    and the settings are stored together."""

    new_kubeconfig = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 14, "cols": 100, "autocomplete": "off"}),
        strip=False,
        max_length=MAX_KUBECONFIG_BYTES,
        help_text="Leave empty to keep the stored kubeconfig (which is never shown). A new one is "
        "checked for this cluster's environment and replaces it.",
    )

    class Meta:
        model = Cluster
        fields = ["name"]

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial_from(self.instance)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not self.errors:
            settings = self.settings_from(data)
            try:
                clusters.settings_check(settings)  # refused settings store nothing at all
                with transaction.atomic():
                    clusters.cluster_update(
                        cluster=self.instance,
                        name=data["name"],
                        kubeconfig_text=data.get("new_kubeconfig") or None,
                    )
                    clusters.cluster_settings_update(cluster=self.instance, settings=settings)
            except clusters.ClusterRegistrationError as exc:
                if exc.field == "kubeconfig":
                    self.add_error("new_kubeconfig", exc.message)
                else:
                    self.add_service_error(exc)
            except KeyUnavailable as exc:
                self.add_error(None, str(exc))
        return data

    def validate_unique(self) -> None:
        pass


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "environment", "server", "auth_kind", "last_test_ok", "last_tested_at"]
    list_filter = ["environment", "last_test_ok"]
    search_fields = ["name", "server"]
    readonly_fields = [
        "environment",
        "server",
        "context_name",
        "auth_kind",
        "created_by",
        "created_at",
        "updated_at",
        "last_test_ok",
        "last_test_server_version",
        "last_test_detail",
        "last_tested_at",
    ]

    # The kubeconfig never appears in Django's error reports.
    @method_decorator(sensitive_post_parameters("kubeconfig", "new_kubeconfig", "hf_token"))
    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(request, *args, **kwargs)

    # Returns a partial of the form class (it binds the user), not a class: typed Any.
    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        kwargs["form"] = ClusterAddForm if obj is None else ClusterChangeForm
        # Only these are model fields of the form: the settings are plain form fields stored by
        # the service, so the ModelForm never copies an unchecked value onto the instance.
        kwargs["fields"] = ["name", "environment"] if obj is None else ["name"]
        form_class: Any = super().get_form(request, obj, change=change, **kwargs)
        return functools.partial(form_class, user=request.user)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("name", "environment", "kubeconfig", *SETTINGS_FIELDS)
        return ("name", "new_kubeconfig", *SETTINGS_FIELDS, *self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [] if obj is None else list(self.readonly_fields)

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).defer("kubeconfig_encrypted", "hf_token_encrypted")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_maintainer(request) and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_maintainer(request) and super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_maintainer(request) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_maintainer(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_maintainer(request) and super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Cluster, form: Any, change: bool) -> None:
        # The form's clean() already stored everything through the service.
        if not change:
            obj.pk = form.registered.pk
