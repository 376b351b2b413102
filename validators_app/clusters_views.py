"""The cluster pages: list, one cluster (with "Test connection" over htmx and its recent runs),
"Add cluster", and a cluster's scheduling settings.

Thin views: reads through ``Cluster`` QuerySets, writes through ``services.clusters``.
Maintainers and auditors may read (a cluster's server says where a site's GPUs are);
registering and testing need the maintainer role (``evidence_app.permissions``), checked here
for htmx requests too. No page ever renders a kubeconfig.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from aicr_site.lib.htmx import HtmxHttpRequest
from evidence_app import permissions
from evidence_app.models import Role
from validators_app.crypto import KeyUnavailable
from validators_app.forms import ClusterRegisterForm, ClusterSettingsForm
from validators_app.models import Cluster
from validators_app.services import clusters
from validators_app.throttles import cluster_test_allowed

READ_ROLES = frozenset({Role.MAINTAINER, Role.AUDITOR})
CONNECTION_TARGET = "connection"


# --- access --------------------------------------------------------------------------------


def can_read(user: Any) -> bool:
    return bool(permissions.roles_of(user) & READ_ROLES)


def can_manage(user: Any) -> bool:
    return Role.MAINTAINER in permissions.roles_of(user)


def _refuse(request: HtmxHttpRequest, message: str) -> HttpResponse:
    """Sign-in for an anonymous full-page request; 403 otherwise (htmx included)."""
    if not request.user.is_authenticated and not request.htmx:
        return redirect_to_login(request.get_full_path())
    return render(request, "evidence_app/forbidden.html", {"message": message}, status=403)


def _cluster_or_404(pk: int) -> Cluster:
    cluster = Cluster.objects.select_related("created_by").filter(pk=pk).first()
    if cluster is None:
        raise Http404("No such cluster.")
    return cluster


READ_REFUSAL = "Clusters are visible to maintainers and auditors only."
MANAGE_REFUSAL = "Only a maintainer can add clusters, change them or test their connection."


# --- pages ---------------------------------------------------------------------------------


@require_safe
def cluster_list(request: HtmxHttpRequest) -> HttpResponse:
    if not can_read(request.user):
        return _refuse(request, READ_REFUSAL)
    rows = Cluster.objects.select_related("created_by").defer("kubeconfig_encrypted")
    context = {"clusters": rows.order_by("name"), "can_manage": can_manage(request.user)}
    return render(request, "validators_app/clusters/list.html", context)


@require_safe
def cluster_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    if not can_read(request.user):
        return _refuse(request, READ_REFUSAL)
    cluster = _cluster_or_404(pk)
    context = {
        "cluster": cluster,
        "can_manage": can_manage(request.user),
        "recent_runs": cluster.runs.recent(),
    }
    return render(request, "validators_app/clusters/detail.html", context)


@require_POST
def cluster_test(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Run "Test connection" (bounded by CLUSTER_TEST_TIMEOUT_SECONDS) and show the result."""
    if not can_manage(request.user):
        return _refuse(request, MANAGE_REFUSAL)
    cluster = _cluster_or_404(pk)
    allowed, wait = cluster_test_allowed(request, cluster_pk=cluster.pk)
    if not allowed:
        seconds = max(1, round(wait or 1))
        response = _refuse(request, f"Too many connection tests: try again in {seconds} s.")
        response.status_code = 429
        response["Retry-After"] = str(seconds)
        return response
    clusters.cluster_test_connection(cluster=cluster)
    if not request.htmx:
        return HttpResponseRedirect(reverse("clusters:detail", args=[cluster.pk]))
    context = {"cluster": cluster, "can_manage": True}
    return render(request, "validators_app/clusters/detail.html#connection", context)


# Keeps the kubeconfig out of Django's error reports (the DEBUG page, mailed reports).
@sensitive_post_parameters("kubeconfig")
@sensitive_variables("data")
@require_http_methods(["GET", "HEAD", "POST"])
def cluster_new(request: HtmxHttpRequest) -> HttpResponse:
    if not can_manage(request.user):
        return _refuse(request, MANAGE_REFUSAL)
    form = ClusterRegisterForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            cluster = clusters.cluster_register(
                name=data["name"],
                kubeconfig_text=data["kubeconfig"],
                environment=data["environment"],
                by=request.user,
            )
        except clusters.ClusterRegistrationError as exc:
            form.add_error(exc.field, exc.message)
        except KeyUnavailable as exc:
            form.add_error(None, str(exc))
        else:
            return HttpResponseRedirect(reverse("clusters:detail", args=[cluster.pk]))
    status = 400 if form.is_bound else 200
    # The person's own paste goes back to them in the form, so an error's "line 2, column 1"
    # points at text that is still there; never cached, so no shared cache keeps the secret.
    response = render(request, "validators_app/clusters/new.html", {"form": form}, status=status)
    add_never_cache_headers(response)
    return response


# The HF token stays out of Django's error reports, as the kubeconfig does.
@sensitive_post_parameters("hf_token")
@sensitive_variables("settings")
@require_http_methods(["GET", "HEAD", "POST"])
def cluster_settings(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Change a cluster's scheduling settings and check inputs (the form shows the stored
    values, never the HF token)."""
    if not can_manage(request.user):
        return _refuse(request, MANAGE_REFUSAL)
    cluster = _cluster_or_404(pk)
    form = ClusterSettingsForm(request.POST if request.method == "POST" else None)
    form.initial_from(cluster)
    if form.is_bound and form.is_valid():
        settings = form.settings_from(form.cleaned_data)
        try:
            clusters.cluster_settings_update(cluster=cluster, settings=settings)
        except clusters.ClusterRegistrationError as exc:
            form.add_service_error(exc)
        except KeyUnavailable as exc:
            form.add_error(None, str(exc))
        else:
            return HttpResponseRedirect(reverse("clusters:detail", args=[cluster.pk]))
    context = {"cluster": cluster, "form": form}
    status = 400 if form.is_bound else 200
    return render(request, "validators_app/clusters/settings.html", context, status=status)
