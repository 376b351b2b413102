from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from evidence_app.coverage.views import check_page

LOGIN_FAILURES = 10  # per address and username
LOGIN_WINDOW_SECONDS = 15 * 60


class ThrottledLoginView(auth_views.LoginView):
    """Sign-in that refuses (429) after ``LOGIN_FAILURES`` failed attempts for one address and
    username within ``LOGIN_WINDOW_SECONDS`` (a password-guessing brake; the admin's login
    form redirects here for unauthenticated users too)."""

    template_name = "evidence_app/login.html"

    def _key(self) -> str:
        username = str(self.request.POST.get("username", ""))[:150].lower()
        return f"login-failures:{self.request.META.get('REMOTE_ADDR', '')}:{username}"

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if (cache.get(self._key()) or 0) >= LOGIN_FAILURES:
            return HttpResponse(
                "Too many failed sign-ins for this account from your address; try again in "
                f"{LOGIN_WINDOW_SECONDS // 60} minutes.",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        key = self._key()
        cache.add(key, 0, LOGIN_WINDOW_SECONDS)
        try:
            cache.incr(key)
        except ValueError:  # expired in between
            cache.set(key, 1, LOGIN_WINDOW_SECONDS)
        return super().form_invalid(form)


urlpatterns = [
    path("", RedirectView.as_view(pattern_name="recipes:list", permanent=False), name="home"),
    path("recipes/", include("recipes_app.urls")),
    path("clusters/", include("validators_app.clusters_urls")),
    path("runs/", include("validators_app.runs_urls")),
    path("check/", check_page, name="check"),
    # /evidence/, /evidence/new/, /evidence/<id>/, /signers/<slug>/
    path("", include("evidence_app.urls")),
    path(
        "accounts/login/",
        ThrottledLoginView.as_view(),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="home"), name="logout"),
    path("api/v1/", include("aicr_site.api_router")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    # Drop-in for aicrd's recipe API, so existing AICR clients can point at this site.
    path("", include("recipes_app.aicrd.urls")),
    path("admin/", admin.site.urls),
]
