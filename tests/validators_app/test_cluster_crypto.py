"""Kubeconfigs at rest: encrypted in the raw database column, rotated by key, unreadable
without the key, and the development key file created once even when processes race."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from tests.validators_app.kubeconfigs import SECRET_TOKEN, kubeconfig
from validators_app import crypto
from validators_app.models import Cluster
from validators_app.services.clusters import cluster_register, clusters_reencrypt

pytestmark = pytest.mark.django_db


def raw_column(cluster: Cluster) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT kubeconfig_encrypted FROM validators_app_cluster WHERE id = %s",
            [cluster.pk],
        )
        return cursor.fetchone()[0]


def register(name: str = "sim-1") -> Cluster:
    return cluster_register(name=name, kubeconfig_text=kubeconfig(), environment="simulated")


def test_it_stores_only_ciphertext_in_the_database(cluster_keys: list[str]) -> None:
    cluster = register()
    stored = raw_column(cluster)
    assert SECRET_TOKEN not in stored
    assert "127.0.0.1" not in stored  # the whole document is encrypted, not just the token
    assert stored.startswith("gAAAAA")  # a Fernet token
    plaintext = Fernet(cluster_keys[0].encode()).decrypt(stored.encode()).decode()
    assert SECRET_TOKEN in plaintext
    assert "current-context: test" in plaintext


def test_a_new_first_key_encrypts_and_the_old_one_still_decrypts(
    cluster_keys: list[str], settings: pytest.FixtureRequest
) -> None:
    old = register("old")
    new_key = Fernet.generate_key().decode()
    settings.CLUSTER_KUBECONFIG_KEYS = [new_key, cluster_keys[0]]  # type: ignore[attr-defined]
    assert SECRET_TOKEN in crypto.kubeconfig_decrypt(old.kubeconfig_encrypted)
    fresh = register("fresh")
    Fernet(new_key.encode()).decrypt(raw_column(fresh).encode())  # raises if not the new key


def test_rotation_reencrypts_every_cluster_so_the_old_key_can_go(
    cluster_keys: list[str], settings: pytest.FixtureRequest
) -> None:
    clusters = [register(f"c{i}") for i in range(3)]
    new_key = Fernet.generate_key().decode()
    settings.CLUSTER_KUBECONFIG_KEYS = [new_key, cluster_keys[0]]  # type: ignore[attr-defined]
    call_command("rotate_cluster_keys", stdout=io.StringIO())
    settings.CLUSTER_KUBECONFIG_KEYS = [new_key]  # type: ignore[attr-defined]
    for cluster in clusters:
        cluster.refresh_from_db()
        assert SECRET_TOKEN in crypto.kubeconfig_decrypt(cluster.kubeconfig_encrypted)
    assert clusters_reencrypt() == 3


def test_without_the_right_key_it_says_so_and_shows_nothing(
    settings: pytest.FixtureRequest,
) -> None:
    cluster = register()
    settings.CLUSTER_KUBECONFIG_KEYS = [Fernet.generate_key().decode()]  # type: ignore[attr-defined]
    with pytest.raises(crypto.KeyUnavailable, match="cannot be decrypted") as caught:
        crypto.kubeconfig_decrypt(cluster.kubeconfig_encrypted)
    assert SECRET_TOKEN not in str(caught.value)
    with pytest.raises(crypto.KeyUnavailable, match="cannot be decrypted"):
        clusters_reencrypt()


def test_without_any_key_in_production_it_names_the_setting(
    settings: pytest.FixtureRequest,
) -> None:
    settings.CLUSTER_KUBECONFIG_KEYS = []  # type: ignore[attr-defined]
    with pytest.raises(crypto.KeyUnavailable, match="CLUSTER_KUBECONFIG_KEY is not set"):
        register()
    assert not Cluster.objects.exists()


def test_development_generates_one_local_key_file(
    tmp_path: Path, settings: pytest.FixtureRequest
) -> None:
    key_file = tmp_path / ".local" / "cluster-kubeconfig.key"
    settings.CLUSTER_KUBECONFIG_KEYS = []  # type: ignore[attr-defined]
    settings.CLUSTER_KUBECONFIG_LOCAL_KEY_FILE = key_file  # type: ignore[attr-defined]
    call_command("ensure_local_keys", stdout=io.StringIO())
    key = key_file.read_text().strip()
    assert key_file.stat().st_mode & 0o077 == 0  # readable by its owner only
    cluster = register()
    assert SECRET_TOKEN in Fernet(key.encode()).decrypt(raw_column(cluster).encode()).decode()
    call_command("ensure_local_keys", stdout=io.StringIO())
    assert key_file.read_text().strip() == key  # kept, never replaced


def test_racing_processes_agree_on_one_local_key(tmp_path: Path) -> None:
    key_file = tmp_path / "k" / "cluster-kubeconfig.key"
    created: list[bool] = []
    threads = [
        threading.Thread(target=lambda: created.append(crypto.ensure_local_key(key_file)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert created.count(True) == 1
    assert [p.name for p in key_file.parent.iterdir()] == ["cluster-kubeconfig.key"]
    Fernet(key_file.read_text().strip().encode())


def test_repr_and_str_hold_no_kubeconfig() -> None:
    cluster = register()
    for text in (repr(cluster), str(cluster)):
        assert SECRET_TOKEN not in text
        assert cluster.kubeconfig_encrypted not in text


def test_ensure_local_keys_prints_a_fresh_key_for_production() -> None:
    out = io.StringIO()
    call_command("ensure_local_keys", "--print", stdout=out)
    Fernet(out.getvalue().strip().encode())  # raises if it is not a Fernet key


def test_ensure_local_keys_refuses_in_production_without_a_key(
    settings: pytest.FixtureRequest,
) -> None:
    settings.CLUSTER_KUBECONFIG_KEYS = []  # type: ignore[attr-defined]
    err = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("ensure_local_keys", stdout=io.StringIO(), stderr=err)
    assert "CLUSTER_KUBECONFIG_KEY is not set" in err.getvalue()


def test_a_malformed_key_stops_the_site_at_start_up() -> None:
    environment = os.environ | {"CLUSTER_KUBECONFIG_KEY": "not-a-key", "DEBUG": "1"}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(__file__).resolve().parents[2],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "CLUSTER_KUBECONFIG_KEY holds a value that is not a Fernet key" in result.stderr
    assert "not-a-key" not in result.stderr.replace("CLUSTER_KUBECONFIG_KEY", "")
