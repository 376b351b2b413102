"""The "Test connection" throttle: each test opens a connection from the site to an address a
maintainer typed, so tests are rate-limited per user and cluster, at
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["cluster-test"]`` (``CLUSTER_TEST_RATE``), on the
API (``ClusterTestView`` declares it) and on the page (``clusters_views.cluster_test``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rest_framework.throttling import SimpleRateThrottle


class ClusterTestThrottle(SimpleRateThrottle):
    scope = "cluster-test"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None  # only maintainers get this far; the permission check refuses others
        cluster = getattr(view, "kwargs", {}).get("pk")
        return self.cache_format % {"scope": self.scope, "ident": f"{user.pk}:{cluster}"}


def cluster_test_allowed(request: Any, *, cluster_pk: int) -> tuple[bool, float | None]:
    """For the page: whether ``request.user`` may test ``cluster_pk`` now, and the seconds to
    wait when not (the API view lets DRF ask the same throttle)."""
    throttle = ClusterTestThrottle()
    view: Any = SimpleNamespace(kwargs={"pk": cluster_pk})  # all get_cache_key reads of a view
    if throttle.allow_request(request, view):
        return True, None
    return False, throttle.wait()
