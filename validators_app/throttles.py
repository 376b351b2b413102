"""The "Test connection" throttles: each test opens a connection from the site to an address a
maintainer typed, so tests are rate-limited per user and cluster (``cluster-test``,
``CLUSTER_TEST_RATE``) and per user across all clusters (``cluster-test-user``,
``CLUSTER_TEST_USER_RATE``: registering more clusters does not buy more connections, e.g. to
probe the ports of a private network). Rates are in ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``;
``CLUSTER_TEST_THROTTLES`` is the one list, on the API (``ClusterTestView``) and on the page
(``clusters_views.cluster_test`` through ``cluster_test_allowed``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rest_framework.throttling import SimpleRateThrottle


class ClusterTestThrottle(SimpleRateThrottle):
    """Per user and cluster."""

    scope = "cluster-test"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None  # only maintainers get this far; the permission check refuses others
        cluster = getattr(view, "kwargs", {}).get("pk")
        return self.cache_format % {"scope": self.scope, "ident": f"{user.pk}:{cluster}"}


class ClusterTestUserThrottle(SimpleRateThrottle):
    """Per user, whichever cluster."""

    scope = "cluster-test-user"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": str(user.pk)}


CLUSTER_TEST_THROTTLES: tuple[type[SimpleRateThrottle], ...] = (
    ClusterTestThrottle,
    ClusterTestUserThrottle,
)


def cluster_test_allowed(request: Any, *, cluster_pk: int) -> tuple[bool, float | None]:
    """For the page: whether ``request.user`` may test ``cluster_pk`` now, and the seconds to
    wait when not (the API view lets DRF ask the same throttles, in the same order)."""
    view: Any = SimpleNamespace(kwargs={"pk": cluster_pk})  # all get_cache_key reads of a view
    for throttle_class in CLUSTER_TEST_THROTTLES:
        throttle = throttle_class()
        if not throttle.allow_request(request, view):
            return False, throttle.wait()
    return True, None
