"""The offline audit package: everything needed to re-verify a set of evidence without this
site, in one signed ``tar.gz``.

Layout (every path relative, no links)::

    README.md                     how to re-verify with public tools
    package.json                  format, when, filters, counts, the site key's fingerprint
    records.ndjson                one export record per evidence (+ its CTRF statuses)
    bundles/<sha256>              the exact uploaded bytes
    artifacts/<sha256>            the signed artifact, where one was stored
    transcripts/<sha256>.json     the site's verification transcript, as the database stores it
    trust/policy.json             accepted OIDC issuers, identity policy, the roots and keys below
    trust/roots/<sha256>.json     the enabled Sigstore trusted roots, byte for byte
    trust/keys/<fingerprint>.pem  the registered public keys (revoked ones marked in policy.json)
    trust/allowlist.yaml          the allowlist version in force
    recipes/<digest>.yaml         the canonical recipe YAML each record binds to (sha256 = digest)
    recipes/index.json            digest → recipe name, catalog, declared checks
    catalogs/<id>.json.gz         the catalog snapshot each bound recipe comes from
    consensus.json                the consensus of these records (``consensus.package_consensus``)
    MANIFEST.sha256               ``sha256sum`` lines over every file above
    MANIFEST.sha256.sig           ECDSA P-256 / SHA-256 signature of MANIFEST.sha256 (base64)
    site-key.pub                  the public half of the key that signed it

Rows are read in chunks over a server-side cursor; the records' lines and the manifest go to
temporary files as they are written, so memory stays bounded by one chunk of bundles however
many records the package holds (``tarstream`` writes the tar.gz). The manifest lists the files
in the order they were written.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any

import orjson
from cryptography.hazmat.primitives.asymmetric import ec
from django.db.models import F, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from evidence_app.consensus.records import NewestCounted, package_consensus_of
from evidence_app.consensus.rules import check_statuses
from evidence_app.exports.records import export_chunks_with, ndjson_line
from evidence_app.exports.signing import key_fingerprint, sign_manifest_digest
from evidence_app.exports.tarstream import TarGzStream
from evidence_app.models import Allowlist, Evidence, SigningKey, TrustRoot
from evidence_app.services.ingest import policy_current
from evidence_app.services.site_key import site_private_key
from evidence_app.services.versions import supported_range
from evidence_app.verification.commands import KEY_SIGNED_UPSTREAM_NOTE
from evidence_app.verification.trust import (
    TrustRootError,
    client_trust_config_json,
    load_trust_root,
)
from recipes_app.models import Catalog, Recipe
from recipes_app.snapshot import FORMAT as SNAPSHOT_FORMAT

FORMAT = "aicr-dashboard-audit-package/v1"
MANIFEST = "MANIFEST.sha256"
SIGNATURE = "MANIFEST.sha256.sig"
SITE_KEY = "site-key.pub"
UNSIGNED_FILES = frozenset({MANIFEST, SIGNATURE, SITE_KEY})
PACKAGE_CHUNK = 200  # rows whose bytes are held at once


def canonical_json(value: Any) -> bytes:
    """The two small files a person opens first (``package.json``, ``trust/policy.json``) and
    the catalog snapshots (``make snapshot``'s format): sorted keys, one item a line."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8") + b"\n"


def data_json(value: Any) -> bytes:
    """The other JSON files this code writes (``recipes/index.json``, ``consensus.json``;
    transcripts are written as stored): sorted keys, compact, one line (``jq .`` shows it
    indented). ``indent`` makes ``json`` fall back to its pure-Python encoder, five times
    slower: the two indexes cost 0.3 s a package that way."""
    return ndjson_line(value)


def package_checks(check_results: Any) -> dict[str, dict[str, str]]:
    """The CTRF status of every check, per phase: what consensus reads from a run."""
    return check_statuses(check_results)


class _Writer:
    """Adds files to the tar and writes the manifest's lines as it goes (to a temporary file,
    hashed on the way: a million records' manifest is hundreds of megabytes, never held).

    ``unique=True`` says the caller knows the path is not written twice (a record's files are
    named by its sha256, unique per evidence); the other paths are remembered to skip
    repeats."""

    def __init__(self, stream: TarGzStream) -> None:
        self.stream = stream
        self._manifest = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        self._manifest_size = 0
        self._manifest_sha256 = hashlib.sha256()
        self._seen: set[str] = set()

    def _list(self, path: str, digest: str) -> None:
        line = f"{digest}  {path}\n".encode()
        self._manifest.write(line)
        self._manifest_sha256.update(line)
        self._manifest_size += len(line)

    def add(self, path: str, data: bytes, *, unique: bool = False, sha256: str = "") -> None:
        """``sha256``: the data's digest where the caller already holds it."""
        if not unique:
            if path in self._seen:
                return
            self._seen.add(path)
        self.stream.add(path, data)
        self._list(path, sha256 or hashlib.sha256(data).hexdigest())

    def add_file(self, path: str, handle: IO[bytes], size: int) -> None:
        """A large member from a temporary file, hashed as it is copied."""
        digest = hashlib.sha256()
        handle.seek(0)
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
        self.stream.add_file(path, handle, size)
        self._list(path, digest.hexdigest())

    def add_signed_manifest(self, key: ec.EllipticCurvePrivateKey) -> None:
        """The manifest of every file added so far, its signature (from the digest taken as
        its lines were written) and the site key: the three files the manifest leaves out."""
        signature, public = sign_manifest_digest(self._manifest_sha256.digest(), key)
        self.stream.add_file(MANIFEST, self._manifest, self._manifest_size)
        self.stream.add(SIGNATURE, signature)
        self.stream.add(SITE_KEY, public.encode("ascii"))

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *_: object) -> None:
        self._manifest.close()


@dataclass(frozen=True)
class PackageSummary:
    records: int
    bytes: int
    seconds: float
    site_key_fingerprint: str


def _trust(writer: _Writer) -> None:
    policy = policy_current()
    roots = []
    for row in TrustRoot.objects.enabled():
        data = row.trusted_root_json.encode("utf-8")
        stem = f"trust/roots/{hashlib.sha256(data).hexdigest()}"
        writer.add(f"{stem}.json", data)
        entry = {
            "name": row.name,
            "production": row.is_production,
            "path": f"{stem}.json",
            "issuers": row.issuer_list,
        }
        try:  # sigstore-python's CLI takes a ClientTrustConfig, not a bare root
            config = client_trust_config_json(load_trust_root(data, name=row.name))
        except (TrustRootError, ValueError):
            config = None  # a root that does not load verifies nothing here either
        if config is not None:
            writer.add(f"{stem}.client_trust_config.json", config.encode("utf-8"))
            entry["client_trust_config"] = f"{stem}.client_trust_config.json"
        roots.append(entry)
    keys = []
    for key in SigningKey.objects.order_by("pk"):
        path = f"trust/keys/{key.fingerprint}.pem"
        writer.add(path, key.public_key_pem.encode("utf-8"))
        keys.append(
            {
                "name": key.name,
                "fingerprint": key.fingerprint,
                "algorithm": key.algorithm,
                "path": path,
                "demo": key.is_demo,
                "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
            }
        )
    allowlist = Allowlist.objects.in_force()
    if allowlist is not None:
        writer.add("trust/allowlist.yaml", allowlist.body.encode("utf-8"))
    writer.add(
        "trust/policy.json",
        canonical_json(
            {
                "accepted_issuers": policy.issuers,
                "identity_regex": policy.identity_regex,
                "extra_policies": dict(policy.extra_policies),
                "trusted_roots": roots,
                "keys": keys,
                "allowlist": {
                    "id": allowlist.pk,
                    "created_at": allowlist.created_at.isoformat(),
                    "path": "trust/allowlist.yaml",
                }
                if allowlist is not None
                else None,
            }
        ),
    )


def _recipes(writer: _Writer, bound: set[tuple[int, str]]) -> dict[str, Any]:
    index: dict[str, Any] = {}
    catalogs: set[int] = set()
    wanted = Q()
    for catalog_id, digest in bound:
        wanted |= Q(catalog_id=catalog_id, digest=digest)
    recipes = Recipe.objects.filter(wanted) if bound else Recipe.objects.none()
    for recipe in recipes.only("name", "catalog_id", "digest", "canonical_yaml", "checks"):
        writer.add(f"recipes/{recipe.digest}.yaml", recipe.canonical_yaml.encode("utf-8"))
        index[recipe.digest] = {
            "name": recipe.name,
            "catalog": recipe.catalog_id,
            "catalog_snapshot": f"catalogs/{recipe.catalog_id}.json.gz",
            "checks": recipe.checks,
        }
        catalogs.add(recipe.catalog_id)
    writer.add("recipes/index.json", data_json(index))
    for catalog_id, content_digest in Catalog.objects.filter(pk__in=catalogs).values_list(
        "pk", "content_digest"
    ):
        writer.add(f"catalogs/{catalog_id}.json.gz", _catalog_snapshot(catalog_id, content_digest))
    return {digest: entry["checks"] for digest, entry in index.items()}


@lru_cache(maxsize=4)
def _catalog_snapshot(catalog_id: int, content_digest: str) -> bytes:
    """A catalog's snapshot file, built once per process: a catalog's files are fixed by its
    content digest, and building it (every file of the recipe tree) cost a fixed 0.3 s a
    package."""
    catalog = Catalog.objects.get(pk=catalog_id)
    snapshot = canonical_json(
        {
            "format": SNAPSHOT_FORMAT,
            "source": catalog.source,
            "aicrVersion": catalog.aicr_version,
            "contentDigest": content_digest,
            "files": dict(sorted(catalog.files.items())),
        }
    )
    return gzip.compress(snapshot, mtime=0)


def audit_package_write(
    queryset: QuerySet[Evidence],
    out: IO[bytes],
    *,
    url_of: Callable[[str, int], str],
    filters: Mapping[str, object],
    site: str,
    progress: Callable[[int], None] | None = None,
) -> PackageSummary:
    """Write the package of ``queryset``'s evidence to ``out`` (a binary file); ``progress``
    is told the records written so far after each chunk of them."""
    started = time.perf_counter()
    key = site_private_key()  # first: no key, no package (SiteKeyUnavailable)
    now = timezone.now()
    with (
        TarGzStream(out, mtime=int(now.timestamp())) as stream,
        _Writer(stream) as writer,
        tempfile.TemporaryFile() as records_file,
    ):
        count, newest, bound = _write_records(
            queryset, writer, records_file, url_of=url_of, progress=progress
        )
        _trust(writer)
        declared = _recipes(writer, bound)
        consensus = package_consensus_of(newest, _line_reader(records_file), declared)
        writer.add("consensus.json", data_json(consensus))
        fingerprint = key_fingerprint(key.public_key())
        writer.add(
            "package.json",
            canonical_json(
                {
                    "format": FORMAT,
                    "created_at": now.isoformat(),
                    "site": site,
                    "filters": dict(sorted(filters.items())),
                    # The records' `counted` and `aicr-unsupported` rest on it ("": any version).
                    "aicr_supported_range": supported_range().text,
                    "records": count,
                    "site_key_fingerprint": fingerprint,
                }
            ),
        )
        writer.add("README.md", readme(site=site, fingerprint=fingerprint).encode("utf-8"))
        writer.add_signed_manifest(key)
    out.flush()
    return PackageSummary(
        records=count,
        bytes=out.tell(),
        seconds=time.perf_counter() - started,
        site_key_fingerprint=fingerprint,
    )


def _write_records(
    queryset: QuerySet[Evidence],
    writer: _Writer,
    records_file: IO[bytes],
    *,
    url_of: Callable[[str, int], str],
    progress: Callable[[int], None] | None,
) -> tuple[int, NewestCounted, set[tuple[int, str]]]:
    """Every record's files and its ``records.ndjson`` line (written to ``records_file``,
    then added); returns the count, where the newest counted run of each (recipe, signer)
    is in that file (all that ``consensus.json`` reads, read back from there: memory holds a
    small tuple per pair, never the runs) and the (catalog, recipe digest) pairs the records
    bind to."""
    newest = NewestCounted()
    bound: set[tuple[int, str]] = set()
    count = 0
    records_size = 0
    chunks = export_chunks_with(
        queryset, url_of=url_of, chunk_size=PACKAGE_CHUNK, extra=_STORED_COLUMNS
    )
    for chunk in chunks:
        for record, (content, artifact, transcript, check_results) in chunk:
            sha = record["sha256"]  # unique per evidence: its files' names are too
            # Evidence.sha256 is the sha256 of these bytes (the ingest computed it).
            writer.add(f"bundles/{sha}", bytes(content), unique=True, sha256=sha)
            if artifact is not None:
                writer.add(f"artifacts/{sha}", bytes(artifact), unique=True)
            writer.add(f"transcripts/{sha}.json", transcript.encode("utf-8"), unique=True)
            line: dict[str, Any] = {
                **record,
                "checks": package_checks(_json_loads(check_results)),
                "bundle": f"bundles/{sha}",
                "artifact": f"artifacts/{sha}" if artifact is not None else None,
                "transcript": f"transcripts/{sha}.json",
                "recipe_yaml": f"recipes/{record['recipe_digest']}.yaml",
            }
            data = _record_line(line)
            records_file.write(data)
            bound.add((record["catalog"], record["recipe_digest"]))
            if record["counted"]:
                newest.add(line, at=(records_size, len(data)))
            records_size += len(data)
            count += 1
        if progress is not None:
            progress(count)
    writer.add_file("records.ndjson", records_file, records_size)
    return count, newest, bound


# What a record's files are made of, read in the pass that reads its export columns. The
# transcript is written as the database renders its JSON (jsonb's text on PostgreSQL): decoding
# it and encoding it again was 2 of the 7 s a 15,000-record package took at 1M records.
_STORED_COLUMNS = {
    "audit_content": F("content"),
    "audit_artifact": F("artifact"),
    "audit_transcript": Cast("transcript", TextField()),
    "audit_check_results": Cast("check_results", TextField()),
}


def _record_line(line: Mapping[str, Any]) -> bytes:
    """``ndjson_line(line)``, through orjson (three times faster): for a record the bytes are
    the same, since a record holds no float, the one type whose text the two write differently
    (``1e-07`` against ``1e-7``); a test holds every line of a package equal. The standard
    library where orjson refuses: integers beyond 64 bits, lone surrogates."""
    try:
        return orjson.dumps(line, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return ndjson_line(line)


def _json_loads(text: str | bytes) -> Any:
    """A stored JSON document (orjson, four times faster; the standard library where orjson
    refuses it: a number past a double's range. Integers beyond 64 bits orjson reads as
    floats, which the statuses read from here never are)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _line_reader(records_file: IO[bytes]) -> Callable[[tuple[int, int]], dict[str, Any]]:
    """Reads a record back from its (offset, length) in ``records_file`` (its line, as
    written: what ``verify_audit`` recomputes ``consensus.json`` from too)."""

    def read(at: tuple[int, int]) -> dict[str, Any]:
        offset, length = at
        records_file.seek(offset)
        record: dict[str, Any] = _json_loads(records_file.read(length))
        return record

    return read


def readme(*, site: str, fingerprint: str) -> str:
    return f"""# Audit package of {site}

Every file but the last three is listed in `MANIFEST.sha256`; `MANIFEST.sha256.sig` is this
site's ECDSA P-256 signature of that manifest and `site-key.pub` its public key, whose sha256
(DER SubjectPublicKeyInfo) is `{fingerprint}`. Compare that key with the one the site
publishes before trusting anything else here.

## Re-verify with public tools (no network needed)

```sh
mkdir pkg && tar -xzf audit.tar.gz -C pkg && cd pkg
# 1. the manifest is the site's (either tool)
cosign verify-blob --key site-key.pub --signature MANIFEST.sha256.sig MANIFEST.sha256
base64 -d MANIFEST.sha256.sig > manifest.sig.der && \\
  openssl dgst -sha256 -verify site-key.pub -signature manifest.sig.der MANIFEST.sha256
# 2. every file is what the manifest says
sha256sum --check --strict MANIFEST.sha256
# 3. each bundle's name is its sha256 (step 2 covers this too)
for f in bundles/*; do [ "$(sha256sum < "$f" | cut -d' ' -f1)" = "${{f#bundles/}}" ] \\
  || echo "MISMATCH $f"; done
# 4. each record binds to its recipe: sha256(recipes/<digest>.yaml) == <digest>
for f in recipes/*.yaml; do [ "$(sha256sum < "$f" | cut -d' ' -f1).yaml" = "${{f#recipes/}}" ] \\
  || echo "MISMATCH $f"; done
```

Then each bundle's signature, offline, with the values `records.ndjson` gives for it
(`signer_identity`, `signer_issuer`, `trusted_root`, `signer_key_fingerprint`, `predicate_type`,
`recipe_digest`; the `trust/policy.json` entry of that root names its file):

```sh
# keyless (Sigstore certificate), against the trusted root in the package
cosign verify-blob-attestation --new-bundle-format --bundle bundles/<sha256> \\
  --trusted-root trust/roots/<root sha256>.json \\
  --certificate-identity <signer_identity> --certificate-oidc-issuer <signer_issuer> \\
  --type <predicate_type> recipes/<recipe_digest>.yaml
# key-signed, against the registered key in the package
cosign verify-blob-attestation --new-bundle-format --bundle bundles/<sha256> \\
  --key trust/keys/<signer_key_fingerprint>.pem --insecure-ignore-tlog \\
  --type <predicate_type> recipes/<recipe_digest>.yaml
# key-signed AICR evidence directory, AICR v1.1+ (--key not confirmed offline: check
# `aicr evidence verify --help`)
aicr evidence verify <dir> --key trust/keys/<signer_key_fingerprint>.pem
```

Key-signed records: {KEY_SIGNED_UPSTREAM_NOTE}

or, for keyless bundles, sigstore-python with the same root wrapped as a ClientTrustConfig
(the `client_trust_config` of that root in `trust/policy.json`):

```sh
python -m sigstore --trust-config trust/roots/<root sha256>.client_trust_config.json \\
  verify identity --bundle bundles/<sha256> \\
  --cert-identity <signer_identity> --cert-oidc-issuer <signer_issuer> recipes/<recipe_digest>.yaml
```

An AICR evidence directory (`container` `summary-bundle`) is a tarball: its signed bundle is
`attestation.intoto.jsonl` inside it (`tar -xzf bundles/<sha256>`), checked the same way,
and `aicr evidence verify <dir>` checks its manifest and CTRF digests.
`transcripts/` holds what this site checked when it accepted each record.

## All of it at once

The site's own checker does every step above, offline and without a database:

```sh
python manage.py verify_audit audit.tar.gz --key site-key-you-trust.pub --json
```

It checks the manifest and its signature, each bundle against the roots and keys in this
package, each record's binding to its recipe digest, the records against the bundles, and
recomputes `consensus.json` from `records.ndjson`.

`consensus.json` is the consensus of the records in this package (per recipe, the newest
counted run of each signer): a package exported with filters states the consensus of what it
holds, not necessarily what the site shows. Records marked `is_demo` are signed with demo keys;
`is_simulated` runs never count, nor do runs made with an AICR version outside the site's
supported range (`aicr_supported_range` in `package.json`; stale reason `aicr-unsupported`).
"""
