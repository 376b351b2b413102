"""A real OCI registry for tests: Debian's ``docker-registry`` (distribution 2.8) on a loopback
port, filesystem storage in a temporary folder, optionally behind htpasswd (Basic) auth."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bcrypt_line(username: str, password: str) -> str:
    """An htpasswd line (bcrypt, which distribution's htpasswd auth requires)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # crypt: glibc's bcrypt, stdlib
        import crypt

        salt = crypt.mksalt(crypt.METHOD_BLOWFISH)  # noqa: S324 - bcrypt, test credentials
        return f"{username}:{crypt.crypt(password, salt)}\n"


@contextlib.contextmanager
def running_registry(root: Path, *, htpasswd: str = "") -> Iterator[str]:
    """``host:port`` of a registry serving from ``root`` until the block ends."""
    binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    if not Path(binary).exists():
        pytest.skip("Debian's docker-registry is not installed (apt-get install docker-registry)")
    port = free_port()
    auth = ""
    if htpasswd:
        (root / "htpasswd").write_text(htpasswd)
        auth = f"auth:\n  htpasswd:\n    realm: tests\n    path: {root / 'htpasswd'}\n"
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n" + auth
    )
    log = (root / "registry.log").open("wb")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with opener.open(f"http://127.0.0.1:{port}/v2/", timeout=1):
                    break
            except urllib.error.HTTPError as exc:
                if exc.code == 401:  # up, and asking for credentials
                    break
                raise
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"docker-registry did not start: {(root / 'registry.log').read_text()}"
                    )
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
