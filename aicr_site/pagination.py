"""Page-number pagination for the API's lists that rarely grow while a client walks them
(recipes, signers, validation runs): ``?page=`` and ``?page_size=`` up to 200, default
``REST_FRAMEWORK["PAGE_SIZE"]``. Evidence, which grows while it is read, uses a cursor
(``evidence_app.api.pagination``)."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class PagePagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 200
