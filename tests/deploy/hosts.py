"""Test hosts on this machine: one network namespace per host, joined by veth pairs to a bridge
that lives in a namespace of its own, every address in 127.0.0.0/8 (nothing leaves loopback
range, and the machine's own namespace is never touched).

Inside each host namespace, ``lo`` keeps only 127.0.0.1/32 (the usual 127.0.0.0/8 on ``lo``
would make every 127.x address local) and ``route_localnet`` lets 127.77.0.0/24 travel over
``eth0``. A process is started on a host with ``ip netns exec``; a host is "killed" by SIGKILL
of every process in its namespace (``ip netns pids``). The test process itself reaches the hosts
from a ``client`` host: ``Host.call`` runs a function on a thread that joined that namespace
(``setns`` is per thread), so its sockets are made there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
SUBNET = "127.77.0"


class NamespacesUnavailable(RuntimeError):
    pass


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise NamespacesUnavailable(f"ip {' '.join(args)}: {result.stderr.strip()}")


@dataclass
class Host:
    name: str
    netns: str
    address: str
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = None

    def start(
        self, command: list[str], *, env: dict[str, str], log: str, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        with (self.logs / f"{self.name}-{log}.log").open("ab") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, *command],
                env=env,
                cwd=cwd,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def run(
        self,
        command: list[str],
        *,
        env: dict[str, str],
        cwd: Path | None = None,
        timeout: float = 300,
    ) -> str:
        result = subprocess.run(
            ["ip", "netns", "exec", self.netns, *command],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise AssertionError(f"{self.name}: {command[:3]} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def pids(self) -> list[int]:
        out = subprocess.run(
            ["ip", "netns", "pids", self.netns], capture_output=True, text=True, timeout=30
        ).stdout
        return [int(pid) for pid in out.split()]

    def kill_all(self, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to every process in this host's namespace (the host "dies")."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if sig == signal.SIGKILL:
            for process in self.processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=20)
            self.processes = [p for p in self.processes if p.poll() is None]
        return len(pids)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> list[int | None]:
        """What ``docker stop`` does to a container: ``sig`` to each service's main process
        (its PID 1) and nothing else, then wait for them to exit. Their exit codes (None: still
        running at ``timeout``); the processes that exited are forgotten."""
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
        codes: list[int | None] = []
        deadline = time.monotonic() + timeout
        for process in self.processes:
            try:
                codes.append(process.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        self.processes = [p for p in self.processes if p.poll() is None]
        return codes

    def log_text(self, log: str) -> str:
        path = self.logs / f"{self.name}-{log}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a thread inside this host's network namespace."""
        return self.pool().submit(fn, *args, **kwargs).result()

    def pool(self, workers: int = 32) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=workers, initializer=_enter, initargs=(self.netns,)
            )
        return self._pool


def _enter(netns: str) -> None:
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        os.setns(fd, os.CLONE_NEWNET)
    finally:
        os.close(fd)


class Network:
    """The bridge namespace and the hosts on it; ``close`` kills and removes everything."""

    def __init__(self, logs: Path) -> None:
        self.prefix = f"aicr-{uuid.uuid4().hex[:6]}"
        self.logs = logs
        self.hosts: dict[str, Host] = {}
        self.bridge = f"{self.prefix}-br"
        _ip("netns", "add", self.bridge)
        _ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge, "link", "set", "br0", "up")

    def add(self, name: str, octet: int) -> Host:
        netns = f"{self.prefix}-{name}"
        address = f"{SUBNET}.{octet}"
        _ip("netns", "add", netns)
        host = Host(name, netns, address, self.logs)
        self.hosts[name] = host
        veth = f"v{octet}"
        _ip("-n", self.bridge, "link", "add", veth, "type", "veth", "peer", "eth0", "netns", netns)
        _ip("-n", self.bridge, "link", "set", veth, "master", "br0", "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        _ip("-n", netns, "addr", "del", "127.0.0.1/8", "dev", "lo")
        _ip("-n", netns, "addr", "add", "127.0.0.1/32", "dev", "lo")
        for conf in ("all", "default", "eth0"):
            _ip("netns", "exec", netns, "sysctl", "-qw", f"net.ipv4.conf.{conf}.route_localnet=1")
        _ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        return host

    def close(self) -> None:
        for host in self.hosts.values():
            host.kill_all()
            if host._pool is not None:
                host._pool.shutdown(wait=False, cancel_futures=True)
        for host in self.hosts.values():
            subprocess.run(["ip", "netns", "del", host.netns], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.bridge], capture_output=True, timeout=30)


def namespaces_unavailable_reason() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_SYS_ADMIN) to be made; not root here"
    for tool in ("ip",):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"`{tool}` (iproute2) is not installed"
    probe = f"aicr-probe-{uuid.uuid4().hex[:6]}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"`ip netns add` is refused here: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def wait_until(
    predicate: Callable[[], bool], what: str, timeout: float, logs: Callable[[], str] = str
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:  # noqa: S110 - not up yet: asked again
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{logs()[-6000:]}")
