"""kubectl (client-go) as a second real client of the simulated cluster."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
HAS_KUBECTL = Path(KUBECTL).exists()


def kubectl_for(kubeconfig: str, home: Path) -> Callable[..., str]:
    """``kubectl(*args) -> stdout`` against ``kubeconfig`` (written under ``home``), failing the
    test on a non-zero exit or a client-side "Unhandled Error" (e.g. a discovery 404)."""
    (home / "config").write_text(kubeconfig)
    env = {"KUBECONFIG": str(home / "config"), "HOME": str(home), "PATH": "/usr/bin:/bin"}

    def kubectl(*args: str) -> str:
        done = subprocess.run(
            [KUBECTL, *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "Unhandled Error" not in done.stderr, done.stderr
        return done.stdout

    return kubectl
