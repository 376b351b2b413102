from __future__ import annotations

import pytest

from tests.aicr_site.api_objects import ApiObjects, api_objects_make


@pytest.fixture
def api_objects(real_catalog: object) -> ApiObjects:
    return api_objects_make(real_catalog)
