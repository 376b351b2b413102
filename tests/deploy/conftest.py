"""The multi-host deployment, started once for tests/deploy/ and torn down after it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.hosts import namespaces_unavailable_reason

MISSING_TOOLS = {
    "nginx": "/usr/sbin/nginx",
    "redis-server": shutil.which("redis-server"),
    "runuser": shutil.which("runuser"),
}


@pytest.fixture(scope="session")
def deployment() -> Iterator[object]:
    reason = namespaces_unavailable_reason()
    if reason is not None:
        pytest.skip(f"the multi-host test makes network namespaces: {reason}")
    missing = [name for name, path in MISSING_TOOLS.items() if not path or not Path(path).exists()]
    if missing:
        pytest.skip(
            f"the multi-host test runs {', '.join(missing)}: not installed (.ci/run installs them)"
        )
    from tests.deploy.deployment import Deployment

    # Not under pytest's 0700 temp root: PostgreSQL runs as its own user and reads its files.
    tmp = Path(tempfile.mkdtemp(prefix="aicr-multihost-"))
    site = Deployment(tmp)
    try:
        site.up()
        yield site
    finally:
        site.close()
        shutil.rmtree(tmp, ignore_errors=True)
