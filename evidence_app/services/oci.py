"""Evidence by OCI reference: ``registry/repository@sha256:<manifest digest>``, pulled by an
``ingest`` worker and then verified like an upload.

* Only digest-pinned references are accepted (a tag can be moved after the fact); the
  registry must be named explicitly. Parsing needs no network, so the web process can refuse a
  bad reference at once; it never contacts the registry itself (``oci_upload_request`` only
  writes a pending ``UploadLog`` and enqueues ``tasks.ingest_oci`` after commit).
* The worker speaks the OCI distribution API over HTTPS (anonymous bearer-token challenge
  supported), or plain HTTP only to a loopback registry when
  ``EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP`` is on. Every address it connects to (redirects and token
  realms included) must be public, unless the registry is listed in
  ``EVIDENCE_OCI_ALLOWED_REGISTRIES`` (then only listed registries are pulled from) or is
  loopback with the setting on. The connection goes to the very address that was checked (no
  second DNS lookup: a name cannot be re-bound to an internal address in between), with the
  name in the Host header and for TLS (SNI, certificate). No proxies from the environment.
* The manifest's sha256 must equal the pinned digest and the layer's sha256 its descriptor's:
  the registry is not trusted for content. Sizes are capped by ``EVIDENCE_MAX_UPLOAD_BYTES``.
* The evidence layer is the one with a Sigstore bundle media type (or a ``*.sigstore.json`` /
  ``*.jsonl`` title), else the one tar(+gzip) layer (an evidence directory), else the only layer
  (``oras push`` of a plain file).
* An evidence directory pushed unsigned and signed afterwards (``aicr evidence publish
  --no-sign`` + ``aicr evidence sign``, AICR-V1.md §7) has its Sigstore bundle attached as an
  OCI referrer whose subject is the artifact's manifest, and the bundle's in-toto subject is
  that manifest digest. Such a directory's signature is looked up with the Referrers API
  (``/v2/<repo>/referrers/<digest>``), or the referrers tag schema (tag ``sha256-<hex>``) on a
  registry without it, as ``aicr evidence verify`` does. The bundle is written into the
  directory as its ``attestation.intoto.jsonl`` (a file the manifest never lists), so the stored
  evidence is the self-contained directory ``aicr evidence verify ./summary-bundle`` reads.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from aicr_site.lib import outbound
from aicr_site.lib.env import SecretFileError, read_secret_file
from evidence_app.models import EvidencePointer, UploadLog, UploadState, Verdict
from evidence_app.services.ingest import ExpectedSigner, evidence_ingest, max_upload_bytes
from evidence_app.services.ingest.queued import INTERNAL_ERROR, finish_refused, upload_claim
from evidence_app.verification._json import JSONLimitError, JSONLimits, load_json
from evidence_app.verification.pipeline import is_archive
from evidence_app.verification.summary_bundle import (
    ATTESTATION,
    SummaryBundleError,
    open_summary_bundle,
    read_archive,
)

logger = logging.getLogger(__name__)

MAX_REF_CHARS = 500
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_TOKEN_BYTES = 64 * 1024
MAX_PASSWORD_CHARS = 16 * 1024
MAX_REDIRECTS = 5
USER_AGENT = "aicr-validation-dashboard (evidence ingest)"

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_ARTIFACT_MANIFEST = "application/vnd.oci.artifact.manifest.v1+json"
INDEXES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
ACCEPT = ", ".join((OCI_MANIFEST, DOCKER_MANIFEST, OCI_ARTIFACT_MANIFEST, *INDEXES))
TITLE = "org.opencontainers.image.title"
BUNDLE_MEDIA_PREFIX = "application/vnd.dev.sigstore.bundle"
ARCHIVE_MEDIA_TYPES = (
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/x-tar",
    "application/gzip",
    "application/tar+gzip",
)
_MANIFEST_LIMITS = JSONLimits(max_bytes=MAX_MANIFEST_BYTES, max_depth=16, max_object_keys=256)

_HOST = re.compile(
    r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)(?::[0-9]{1,5})?"
)
_REPO_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class OciError(Exception):
    """A reference or pull that cannot give evidence; ``verdict`` says how to record it."""

    def __init__(self, message: str, *, verdict: str = Verdict.REJECTED) -> None:
        super().__init__(message)
        self.message = message
        self.verdict = verdict


@dataclass(frozen=True)
class OciRef:
    registry: str  # host[:port]
    repository: str
    digest: str  # sha256:<hex>
    tag: str = ""

    @property
    def pinned(self) -> str:
        return f"{self.registry}/{self.repository}@{self.digest}"

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(f"//{self.registry}").hostname or ""

    @property
    def port(self) -> int | None:
        return urllib.parse.urlsplit(f"//{self.registry}").port


def parse_oci_ref(text: str) -> OciRef:
    """Parse a digest-pinned reference; ``OciError`` with the reason otherwise (no network)."""
    ref = (text or "").strip()
    if not ref:
        raise OciError("oci_ref is empty: give registry/repository@sha256:<digest>")
    if len(ref) > MAX_REF_CHARS:
        raise OciError(f"oci_ref is longer than {MAX_REF_CHARS} characters")
    ref = ref.removeprefix("oci://")
    name, at, digest = ref.partition("@")
    tag = ""
    slash = name.find("/")
    if slash > 0 and ":" in name[slash:]:
        name, _, tag = name.rpartition(":")
        if not _TAG.fullmatch(tag):
            raise OciError(f"oci_ref: {tag[:60]!r} is not a valid tag")
    if not at:
        if tag:
            raise OciError(
                f"oci_ref names tag {tag!r}, which can be moved after the fact: pin it by digest "
                "(registry/repository@sha256:<manifest digest>, e.g. from `oras resolve` or "
                "`crane digest`)"
            )
        raise OciError("oci_ref has no digest: give registry/repository@sha256:<manifest digest>")
    if not _DIGEST.fullmatch(digest):
        raise OciError("oci_ref: the digest must be sha256:<64 lowercase hex digits>")
    registry, repository = _registry_and_repository(
        name, what="oci_ref", example="ghcr.io/org/repo@sha256:…"
    )
    return OciRef(registry=registry, repository=repository, digest=digest, tag=tag)


def _registry_and_repository(name: str, *, what: str, example: str) -> tuple[str, str]:
    """``host[:port]/repository`` split and checked (the host lower-cased)."""
    registry, _, repository = name.partition("/")
    if not repository or not _HOST.fullmatch(registry):
        raise OciError(f"{what} must start with the registry host, e.g. {example}")
    if "." not in registry and ":" not in registry and registry != "localhost":
        raise OciError(
            f"{what}: {registry!r} is not a registry host; name it explicitly (e.g. {example})"
        )
    if len(repository) > 255 or not all(
        _REPO_COMPONENT.fullmatch(part) for part in repository.split("/")
    ):
        raise OciError(f"{what}: {repository[:100]!r} is not a valid repository name")
    return registry.lower(), repository


def parse_oci_repository(text: str, *, what: str = "repository") -> OciRef:
    """``registry/repository`` (no tag, no digest), as an ``OciRef`` whose ``digest`` is empty:
    where run evidence is pushed (``RUN_EVIDENCE_OCI_REPOSITORY``). No network."""
    name = (text or "").strip().removeprefix("oci://")
    if not name:
        raise OciError(
            f"{what} is empty: give registry/repository, e.g. registry.example/org/evidence"
        )
    if len(name) > MAX_REF_CHARS:
        raise OciError(f"{what} is longer than {MAX_REF_CHARS} characters")
    if "@" in name or ":" in name[max(name.find("/"), 0) :]:
        raise OciError(
            f"{what} names a tag or digest: give registry/repository only (each push is "
            "addressed by its own digest)"
        )
    registry, repository = _registry_and_repository(
        name, what=what, example="registry.example/org/repo"
    )
    return OciRef(registry=registry, repository=repository, digest="")


def push_registry() -> str:
    """The registry run evidence is pushed to (``RUN_EVIDENCE_OCI_REPOSITORY``), "" for none."""
    configured = getattr(settings, "RUN_EVIDENCE_OCI_REPOSITORY", "") or ""
    if not configured:
        return ""
    try:
        return parse_oci_repository(configured).registry
    except OciError:
        return ""  # settings refuse a malformed value at start-up; nothing is named here


def operator_registries() -> list[str]:
    """Registries the operator named: ``EVIDENCE_OCI_ALLOWED_REGISTRIES`` and the push
    registry. Only these are reached on a private address (see ``_check_destination``)."""
    named = [r.lower() for r in getattr(settings, "EVIDENCE_OCI_ALLOWED_REGISTRIES", [])]
    return [*named, push] if (push := push_registry()) else named


def registry_permitted(ref: OciRef) -> None:
    """Refuse, before any network, references this site does not pull."""
    if not getattr(settings, "EVIDENCE_OCI_ENABLED", False):
        raise OciError(
            "OCI references are not pulled on this site: pulls run only on an ingest worker "
            "(EVIDENCE_OCI_ENABLED); upload the bundle instead"
        )
    allowed = [r.lower() for r in getattr(settings, "EVIDENCE_OCI_ALLOWED_REGISTRIES", [])]
    if allowed and not _named_by_operator(ref, [*allowed, push_registry()]):
        raise OciError(
            f"registry {ref.registry} is not one this site pulls from ({', '.join(allowed)})"
        )


# --- HTTP ------------------------------------------------------------------------------------


def _named_by_operator(ref: OciRef, named: list[str]) -> bool:
    return any(entry and entry in (ref.registry, ref.host) for entry in named)


def _is_loopback_host(host: str) -> bool:
    address = outbound.literal_address(host)
    return host == "localhost" or (address is not None and address.is_loopback)


def _check_destination(url: str, *, registry: OciRef) -> outbound.Destination:
    """Resolve the URL's host once and refuse it unless the outbound policy permits it (public
    addresses; loopback with ``EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP``; private ones too for an
    operator-listed registry); the connection goes to the returned address."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("https", "http"):
        raise OciError(f"refusing to follow a {parts.scheme or 'relative'} URL from the registry")
    loopback_ok = bool(getattr(settings, "EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP", False))
    # The registry itself, when the operator named it (a token realm or redirect elsewhere is
    # held to the public-address rule).
    listed = host == registry.host and _named_by_operator(registry, operator_registries())
    policy = outbound.Policy(loopback=loopback_ok, private=listed)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        destination = outbound.resolve(host, port, policy, what="registry host")
    except ValueError:
        raise OciError(f"registry URL {url[:200]!r} has an invalid port") from None
    except outbound.Unresolvable as exc:
        raise OciError(exc.message) from None
    except outbound.DestinationRefused as exc:
        raise OciError(
            f"refusing to connect to {host}: it resolves to a non-public address ({exc.message})"
        ) from None
    loopback = all(a.is_loopback for a in destination.addresses)
    if parts.scheme == "http" and not (loopback and loopback_ok):
        raise OciError(
            f"refusing plain HTTP to {host}: only HTTPS, or a loopback registry when "
            "EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP is on"
        )
    return destination


def _scheme(ref: OciRef) -> str:
    loopback_ok = bool(getattr(settings, "EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP", False))
    return "http" if loopback_ok and _is_loopback_host(ref.host) else "https"


def _timeout() -> float:
    return float(getattr(settings, "EVIDENCE_OCI_TIMEOUT_SECONDS", 30))


def _read(response: Any, limit: int, what: str) -> bytes:
    try:
        return outbound.read_capped(response, limit, deadline_s=_timeout())
    except outbound.AnswerTooLarge:
        raise OciError(f"{what} is over the limit of {limit} bytes") from None
    except outbound.DeadlineExceeded:
        raise OciError(
            f"registry is unreachable (sending {what} took longer than {_timeout():g} s); try "
            "again later"
        ) from None


def _open(
    url: str,
    *,
    ref: OciRef,
    headers: dict[str, str],
    method: str = "GET",
    data: bytes | None = None,
) -> Any:
    """One request to ``url`` through the outbound policy (the answer unread: ``_read`` it)."""
    address = _check_destination(url, registry=ref)
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        url, data=data, method=method, headers={"User-Agent": USER_AGENT, **headers}
    )
    try:
        return outbound.opener(address).open(request, timeout=_timeout())
    except urllib.error.HTTPError as exc:
        return exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OciError(
            f"registry {ref.registry} is unreachable ({reason}); try again later"
        ) from None


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    @property
    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()


def registry_login(ref: OciRef) -> Credentials | None:
    """The site's registry login (``RUN_EVIDENCE_OCI_USERNAME``, ``RUN_EVIDENCE_OCI_PASSWORD``
    or ``_FILE``), for the registry run evidence is pushed to and no other: pulls from it (the
    read-back of a push, a pointer naming it) use it too. None: anonymous."""
    if not ref.registry or ref.registry != push_registry():
        return None
    username = (getattr(settings, "RUN_EVIDENCE_OCI_USERNAME", "") or "").strip()
    if not username:
        return None
    password = getattr(settings, "RUN_EVIDENCE_OCI_PASSWORD", "") or ""
    path = getattr(settings, "RUN_EVIDENCE_OCI_PASSWORD_FILE", "") or ""
    if not password and path:
        try:
            password = read_secret_file(
                path, setting="RUN_EVIDENCE_OCI_PASSWORD_FILE", max_chars=MAX_PASSWORD_CHARS
            )
        except SecretFileError as exc:
            raise OciError(str(exc)) from None
    return Credentials(username=username, password=password)


def authorization(
    challenge: str, *, ref: OciRef, action: str, what: str, login: Credentials | None
) -> str:
    """The ``Authorization`` value answering a registry's 401 ``challenge`` (``Basic`` with the
    login; ``Bearer`` with a token from the realm, for the login or anonymous); ``OciError``
    when the registry wants credentials this site does not have."""
    scheme = challenge.split(" ", 1)[0].lower()
    scope = "pull,push" if action == "push" else "pull"
    token = None
    if scheme == "basic" and login is not None:
        return login.basic
    if scheme == "bearer":
        token = _bearer_token(
            challenge, ref=ref, scope=scope, basic=login.basic if login is not None else ""
        )
    if token is None:
        hint = " (RUN_EVIDENCE_OCI_USERNAME, RUN_EVIDENCE_OCI_PASSWORD)" if action == "push" else ""
        raise OciError(f"registry {ref.registry} requires credentials to {action} {what}{hint}")
    return f"Bearer {token}"


def _bearer_token(
    challenge: str, *, ref: OciRef, scope: str = "pull", basic: str = ""
) -> str | None:
    """A token from a ``WWW-Authenticate: Bearer realm=…`` challenge: anonymous, or for the
    ``basic`` credentials (``Basic <base64>``; a push sends the site's registry login)."""
    if not challenge.lower().startswith("bearer "):
        return None
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.get("realm")
    if not realm:
        return None
    query = {"scope": params.get("scope") or f"repository:{ref.repository}:{scope}"}
    if params.get("service"):
        query["service"] = params["service"]
    url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(query)
    response = _open(url, ref=ref, headers={"Authorization": basic} if basic else {})
    with response:
        if response.status != 200:
            kind = "a token for these credentials" if basic else f"an anonymous {scope} token"
            raise OciError(f"registry {ref.registry} refused {kind} (HTTP {response.status})")
        try:
            doc = load_json(_read(response, MAX_TOKEN_BYTES, "token response"), what="token")
        except JSONLimitError as exc:
            raise OciError(f"registry token response: {exc}") from None
    token = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
    return token if isinstance(token, str) and token else None


def _get(url: str, *, ref: OciRef, accept: str, limit: int, what: str) -> tuple[bytes, str]:
    """GET ``url`` (token challenge and redirects handled): (body, Content-Type)."""
    headers = {"Accept": accept}
    auth: str | None = None
    registry_host = urllib.parse.urlsplit(url).netloc
    for _ in range(MAX_REDIRECTS + 2):
        same_host = urllib.parse.urlsplit(url).netloc == registry_host
        send = dict(headers)
        if auth and same_host:
            send["Authorization"] = auth
        response = _open(url, ref=ref, headers=send)
        with response:
            status = response.status
            if status == 401 and auth is None and same_host:
                auth = authorization(
                    response.headers.get("WWW-Authenticate", ""),
                    ref=ref,
                    action="pull",
                    what=what,
                    login=registry_login(ref),
                )
                continue
            if status in (301, 302, 303, 307, 308):
                location = response.headers.get("Location")
                if not location:
                    raise OciError(f"registry redirect without a Location for {what}")
                url = urllib.parse.urljoin(url, location)
                continue
            if status == 404:
                raise OciError(f"{what} not found in {ref.registry}/{ref.repository} (HTTP 404)")
            if status != 200:
                raise OciError(f"registry {ref.registry} answered HTTP {status} for {what}")
            return _read(response, limit, what), response.headers.get("Content-Type", "")
    raise OciError(f"too many redirects fetching {what}")


@dataclass(frozen=True)
class PulledEvidence:
    data: bytes
    media_type: str
    filename: str
    manifest_digest: str
    layer_digest: str
    referrer_digest: str = ""  # the referrer manifest the signature came from, if any


def _descriptor(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise OciError(f"manifest {where}: expected a descriptor object", verdict=Verdict.INVALID)
    digest, size = item.get("digest"), item.get("size")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise OciError(
            f"manifest {where}: only sha256 digests are supported", verdict=Verdict.UNSUPPORTED
        )
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise OciError(
            f"manifest {where}: size must be a non-negative integer", verdict=Verdict.INVALID
        )
    return item


def _choose_layer(manifest: dict[str, Any]) -> dict[str, Any]:
    raw = manifest.get("layers", manifest.get("blobs"))
    if not isinstance(raw, list) or not raw:
        raise OciError("the manifest has no layers: nothing to verify")
    layers = [_descriptor(item, f"layers[{i}]") for i, item in enumerate(raw[:64])]

    def title(layer: dict[str, Any]) -> str:
        annotations = layer.get("annotations")
        value = annotations.get(TITLE, "") if isinstance(annotations, dict) else ""
        return value if isinstance(value, str) else ""

    def media(layer: dict[str, Any]) -> str:
        value = layer.get("mediaType", "")
        return value if isinstance(value, str) else ""

    bundles = [
        layer
        for layer in layers
        if media(layer).startswith(BUNDLE_MEDIA_PREFIX)
        or title(layer).endswith((".sigstore.json", ".intoto.jsonl"))
    ]
    archives = [
        layer
        for layer in layers
        if media(layer) in ARCHIVE_MEDIA_TYPES and not title(layer).endswith((".json", ".jsonl"))
    ]
    for group in (bundles, archives, layers):
        if len(group) == 1:
            return group[0]
    raise OciError(
        f"the manifest has {len(layers)} layers and none is clearly the evidence (a Sigstore "
        "bundle media type or a *.sigstore.json title)"
    )


def _pinned_manifest(base: str, *, ref: OciRef, digest: str) -> tuple[dict[str, Any], str]:
    """The manifest ``digest`` names (its bytes checked against it) and its media type."""
    body, content_type = _get(
        f"{base}/manifests/{digest}",
        ref=ref,
        accept=ACCEPT,
        limit=MAX_MANIFEST_BYTES,
        what=f"manifest {digest}",
    )
    actual = "sha256:" + hashlib.sha256(body).hexdigest()
    if actual != digest:
        raise OciError(
            f"the registry answered with a manifest whose digest is {actual}, not the pinned "
            f"{digest}",
            verdict=Verdict.INVALID,
        )
    try:
        manifest = load_json(body, what="manifest", limits=_MANIFEST_LIMITS)
    except JSONLimitError as exc:
        raise OciError(str(exc), verdict=Verdict.INVALID) from None
    if not isinstance(manifest, dict):
        raise OciError("the manifest is not a JSON object", verdict=Verdict.INVALID)
    return manifest, str(manifest.get("mediaType") or content_type.split(";")[0].strip())


def _layer_blob(base: str, *, ref: OciRef, layer: dict[str, Any]) -> bytes:
    """The blob ``layer`` describes, checked against its size and digest."""
    limit = max_upload_bytes()
    if layer["size"] > limit:
        raise OciError(f"the evidence layer is {layer['size']} bytes, over the limit of {limit}")
    data, _ = _get(
        f"{base}/blobs/{layer['digest']}",
        ref=ref,
        accept="*/*",
        limit=limit,
        what=f"blob {layer['digest']}",
    )
    if (
        len(data) != layer["size"]
        or "sha256:" + hashlib.sha256(data).hexdigest() != layer["digest"]
    ):
        raise OciError(
            f"blob {layer['digest']} does not match its descriptor (size or sha256)",
            verdict=Verdict.INVALID,
        )
    return data


def oci_pull(ref: OciRef) -> PulledEvidence:
    """Fetch the evidence layer of ``ref`` (see the module docstring)."""
    base = f"{_scheme(ref)}://{ref.registry}/v2/{ref.repository}"
    manifest, media_type = _pinned_manifest(base, ref=ref, digest=ref.digest)
    if media_type in INDEXES:
        raise OciError(
            "the digest names an image index, not an artifact: pin the digest of the evidence "
            "artifact's own manifest"
        )
    if media_type not in (OCI_MANIFEST, DOCKER_MANIFEST, OCI_ARTIFACT_MANIFEST):
        raise OciError(
            f"unsupported manifest media type {str(media_type)[:100]!r}",
            verdict=Verdict.UNSUPPORTED,
        )
    layer = _choose_layer(manifest)
    data = _layer_blob(base, ref=ref, layer=layer)
    referrer_digest = ""
    if _unsigned_directory(data):
        signature = _referrer_bundle(base, ref=ref)
        if signature is not None:
            referrer_digest, bundle = signature
            data = _with_attestation(data, bundle)
    found = layer.get("annotations")
    annotations: dict[str, Any] = found if isinstance(found, dict) else {}
    filename = annotations.get(TITLE) if isinstance(annotations.get(TITLE), str) else ""
    return PulledEvidence(
        data=data,
        media_type=str(layer.get("mediaType") or ""),
        filename=(filename or layer["digest"].replace(":", "-"))[:255],
        manifest_digest=ref.digest,
        layer_digest=layer["digest"],
        referrer_digest=referrer_digest,
    )


# --- signatures attached as referrers (AICR-V1.md §7) ----------------------------------------


def _unsigned_directory(data: bytes) -> bool:
    """An evidence directory without its own attestation (an unreadable one is left for the
    verification pipeline to report)."""
    if not is_archive(data):
        return False
    try:
        return open_summary_bundle(data).signed_bundle is None
    except SummaryBundleError:
        return False


def _referrers_index(base: str, *, ref: OciRef) -> dict[str, Any] | None:
    """The image index of manifests whose subject is ``ref``: the Referrers API, else the
    referrers tag schema; None when the registry has neither for it."""
    accept = INDEXES[0]
    fallback = f"{base}/manifests/{ref.digest.replace(':', '-')}"
    for url, what in (
        (f"{base}/referrers/{ref.digest}", f"referrers of {ref.digest}"),
        (fallback, f"referrers tag of {ref.digest}"),
    ):
        try:
            body, _ = _get(url, ref=ref, accept=accept, limit=MAX_MANIFEST_BYTES, what=what)
        except OciError as exc:
            if "HTTP 404" in exc.message:
                continue
            raise
        try:
            index = load_json(body, what="referrers index", limits=_MANIFEST_LIMITS)
        except JSONLimitError as exc:
            raise OciError(str(exc), verdict=Verdict.INVALID) from None
        if isinstance(index, dict) and isinstance(index.get("manifests"), list):
            return index
        raise OciError(f"{what} is not an image index", verdict=Verdict.INVALID)
    return None


def _referrer_bundle(base: str, *, ref: OciRef) -> tuple[str, bytes] | None:
    """(referrer manifest digest, Sigstore bundle) of the first Sigstore-bundle referrer of
    ``ref``, or None. The referrer's own manifest is re-read by digest and must name ``ref`` as
    its subject: the index is the registry's word, not trusted for content."""
    index = _referrers_index(base, ref=ref)
    if index is None:
        return None
    for i, item in enumerate(index["manifests"][:64]):
        descriptor = _descriptor(item, f"referrers[{i}]")
        if not str(descriptor.get("artifactType") or "").startswith(BUNDLE_MEDIA_PREFIX):
            continue
        manifest, _ = _pinned_manifest(base, ref=ref, digest=descriptor["digest"])
        subject = manifest.get("subject")
        if not isinstance(subject, dict) or subject.get("digest") != ref.digest:
            raise OciError(
                f"referrer {descriptor['digest']} does not name {ref.digest} as its subject",
                verdict=Verdict.INVALID,
            )
        layer = _choose_layer(manifest)
        return descriptor["digest"], _layer_blob(base, ref=ref, layer=layer)
    return None


def _with_attestation(data: bytes, bundle: bytes) -> bytes:
    """The evidence directory ``data`` with ``bundle`` as its ``attestation.intoto.jsonl``
    (beside manifest.json), as a tar.gz with fixed metadata."""
    try:
        files = read_archive(data)
        root = open_summary_bundle(data).root
    except SummaryBundleError:
        return data  # unreadable after all: the pipeline reports it on the original bytes
    files[f"{root}{ATTESTATION}"] = bundle.replace(b"\n", b"").strip() + b"\n"
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


# --- the upload workflow ---------------------------------------------------------------------


def _refused(log: UploadLog, message: str, verdict: str) -> UploadLog:
    detail = f"OCI pull failed: {message}" if log.pk and log.state != UploadState.DONE else message
    return finish_refused(log, detail, verdict)


@transaction.atomic
def oci_upload_request(*, oci_ref: str, user: Any) -> UploadLog:
    """Record an OCI upload and enqueue its pull (after commit); a bad reference is refused at
    once (the log is ``done`` with the reason)."""
    from evidence_app import tasks  # tasks import this module

    log = UploadLog(
        user=user if getattr(user, "is_authenticated", False) else None,
        channel="oci",
        oci_ref=(oci_ref or "")[:500],
        state=UploadState.PENDING,
    )
    try:
        ref = parse_oci_ref(oci_ref)
        registry_permitted(ref)
    except OciError as exc:
        return _refused(log, exc.message, exc.verdict)
    log.oci_ref = ref.pinned
    log.filename = ref.pinned[-255:]
    log.save()
    upload_id = log.pk
    transaction.on_commit(lambda: tasks.ingest_oci.delay(upload_id))
    return log


def _pointer_signer(log: UploadLog) -> ExpectedSigner | None:
    """The signer an AICR pointer that asked for this pull claims (verified pinned to it, as
    AICR's ingest does); None for a contributor's own OCI upload."""
    pointer = EvidencePointer.objects.filter(upload=log).exclude(signer_issuer="").first()
    if pointer is None:
        return None
    return ExpectedSigner(issuer=pointer.signer_issuer, identity=pointer.signer_identity)


def oci_upload_process(*, upload_id: int) -> UploadLog | None:
    """Pull and ingest a pending OCI upload (idempotent: a finished one is left alone), under
    the claim every queued upload takes (``ingest.queued.upload_claim``: a lease, a cap on
    attempts, ``LeaseHeld`` while another worker holds it)."""
    log, held = upload_claim(upload_id)
    if log is None or not held:
        return log
    try:
        ref = parse_oci_ref(log.oci_ref)
        registry_permitted(ref)
        pulled = oci_pull(ref)
    except OciError as exc:
        return _refused(log, exc.message, exc.verdict)
    try:
        evidence_ingest(
            data=pulled.data,
            artifact=None,
            filename=pulled.filename,
            user=log.user,
            channel="oci",
            oci_ref=ref.pinned,
            oci_manifest_digest=pulled.manifest_digest,
            upload=log,
            expected_signer=_pointer_signer(log),
        )
    except Exception:
        logger.exception("OCI upload %s failed unexpectedly", upload_id)
        _refused(log, INTERNAL_ERROR, Verdict.INVALID)
        raise
    log.refresh_from_db()
    return log
