from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from aicr_site import health, metrics
from evidence_app.coverage.views import check_page
from evidence_app.feeds import evidence_feed
from evidence_app.qualifications.views import qualification_list
from evidence_app.releases.views import release_badge
from recipes_app import views as recipe_views

# Errors in the shape each route speaks: JSON under /api/ and /v1/, a small page elsewhere.
handler400 = "aicr_site.errors.bad_request"
handler403 = "aicr_site.errors.permission_denied"
handler404 = "aicr_site.errors.page_not_found"
handler500 = "aicr_site.errors.server_error"

urlpatterns = [
    path("", recipe_views.home, name="home"),
    path("recipes/", include("recipes_app.urls")),
    path("badges/<str:name>.svg", recipe_views.recipe_badge, name="badge"),
    path("badges/releases/<int:pk>.svg", release_badge, name="release-badge"),
    path("feeds/evidence.atom", evidence_feed, name="evidence-feed"),
    path("clusters/", include("validators_app.clusters_urls")),
    path("runs/", include("validators_app.runs_urls")),
    path("check/", check_page, name="check"),
    path("qualifications/", qualification_list, name="qualifications"),
    # Releases and their "Qualified profiles" (AICR's operator support policy, live).
    path("releases/", include("evidence_app.releases.urls")),
    # /evidence/, /evidence/new/, /evidence/<id>/, /signers/<slug>/
    path("", include("evidence_app.urls")),
    # Failed sign-ins here and at /admin/login/ are throttled by django-axes (settings.py).
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="evidence_app/login.html"),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="home"), name="logout"),
    path("api/v1/", include("aicr_site.api_router")),
    # AICR's dashboard data format, computed from the stored evidence.
    path("aicr/", include("evidence_app.publication_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI inside the site's own frame (header, lang, colour tokens): templates/api_docs.html.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api_docs.html"),
        name="api-docs",
    ),
    # Drop-in for aicrd's recipe API, so existing AICR clients can point at this site.
    path("", include("recipes_app.aicrd.urls")),
    path("admin/", admin.site.urls),
    path("health", health.health, name="health"),
    path("ready", health.ready, name="ready"),
    path("metrics", metrics.metrics, name="metrics"),
]
