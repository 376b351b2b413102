"""Pushing an evidence directory to an OCI registry as ``aicr evidence publish`` lays it out.

The layout follows AICR (``pkg/oci/push.go`` and ``archive.go`` for the artifact,
``pkg/evidence/attestation/oci.go`` for the signature referrer, ``emit.go`` ``signAndPush`` for
the order), so this site's own ``oci_pull`` and AICR's ``aicr evidence verify <oci-ref>`` read
what is pushed here:

* the artifact: an OCI image manifest (schema 2, ``artifactType``
  ``application/vnd.nvidia.aicr.artifact``, the empty config ``{}``) with one layer, the
  evidence directory as a deterministic tar+gzip (entries sorted, parent directories first,
  no timestamps, gzip OS byte 255) carrying ORAS's ``io.deis.oras.content.digest`` (sha256 of
  the tar) and ``io.deis.oras.content.unpack`` annotations; the manifest's
  ``org.opencontainers.image.created`` is the epoch, so the same directory gives the same
  digest. It is pushed under a tag, then addressed by its digest.
* the signature: a manifest whose ``artifactType`` and single layer are the Sigstore bundle
  media type (v0.3) and whose ``subject`` is the artifact's manifest descriptor, pushed by
  digest. A registry that indexes subjects itself says so with an ``OCI-Subject`` header; on
  one that does not (Debian's docker-registry 2.8), the referrer is added to the referrers tag
  schema index (tag ``sha256-<hex>``), which ``oci_pull`` and cosign read there.

Every request goes through ``oci._open``: the one outbound connection policy for registries
(addresses checked once and pinned, plain HTTP only to loopback with
``EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP``, private addresses only for a registry the operator named)
and every answer is read within ``MAX_ANSWER_BYTES`` and the OCI timeout. Redirects and upload
locations are followed only after the same check. Credentials (``RUN_EVIDENCE_OCI_USERNAME``
and ``RUN_EVIDENCE_OCI_PASSWORD``/``_FILE``) go to the registry itself (Basic) or to its token
realm (Bearer token service), never anywhere else, and never appear in a message.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evidence_app.services import oci
from evidence_app.verification._json import JSONLimitError, load_json

AICR_ARTIFACT_TYPE = "application/vnd.nvidia.aicr.artifact"
EMPTY_CONFIG_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
SIGSTORE_BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
INDEX_MEDIA_TYPE = oci.INDEXES[0]
CREATED = "org.opencontainers.image.created"
REPRODUCIBLE_TIMESTAMP = "1970-01-01T00:00:00Z"  # AICR's reproducibleTimestamp
ORAS_CONTENT_DIGEST = "io.deis.oras.content.digest"
ORAS_UNPACK = "io.deis.oras.content.unpack"
# A push's answers are small (empty bodies, a referrers index); anything bigger is refused.
MAX_ANSWER_BYTES = oci.MAX_MANIFEST_BYTES
_ERROR_CODE = re.compile(r"[A-Z_]{1,40}")


class OciPushError(Exception):
    """A push that did not complete; the message says why (no credential in it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    artifact_type: str = ""

    @classmethod
    def of(cls, media_type: str, content: bytes, *, artifact_type: str = "") -> Descriptor:
        digest = "sha256:" + hashlib.sha256(content).hexdigest()
        return cls(media_type, digest, len(content), artifact_type)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest}
        out["size"] = self.size
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        return out


Credentials = oci.Credentials


# --- the artifact's bytes ---------------------------------------------------------------------


def directory_layer(files: Mapping[str, bytes]) -> bytes:
    """``files`` (directory-relative path → bytes) as AICR's deterministic tar+gzip."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        written: set[str] = set()
        for name in sorted(files):
            parts = name.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                directory = "/".join(parts[:depth]) + "/"
                if directory not in written:
                    info = tarfile.TarInfo(directory)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                    written.add(directory)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", compresslevel=9, mtime=0) as out:
        out.write(raw.getvalue())
    layer = bytearray(packed.getvalue())
    layer[9] = 255  # gzip's OS byte: "unknown", as Go's writer leaves it
    return bytes(layer)


def _tar_digest(layer: bytes) -> str:
    return "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()


def _manifest(
    *,
    artifact_type: str,
    layer: Descriptor,
    annotations: Mapping[str, str],
    layer_annotations: Mapping[str, str] | None = None,
    subject: Descriptor | None = None,
) -> bytes:
    layer_json = layer.as_json()
    if layer_annotations:
        layer_json["annotations"] = dict(layer_annotations)
    doc: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": oci.OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": Descriptor.of(EMPTY_CONFIG_MEDIA_TYPE, EMPTY_CONFIG).as_json(),
        "layers": [layer_json],
    }
    if subject is not None:
        doc["subject"] = subject.as_json()
    doc["annotations"] = {**annotations, CREATED: REPRODUCIBLE_TIMESTAMP}
    return json.dumps(doc, separators=(",", ":")).encode()


def artifact_manifest(layer: bytes, *, annotations: Mapping[str, str]) -> bytes:
    """The manifest of the evidence artifact whose one layer is ``layer``."""
    return _manifest(
        artifact_type=AICR_ARTIFACT_TYPE,
        layer=Descriptor.of(LAYER_MEDIA_TYPE, layer),
        annotations=annotations,
        layer_annotations={ORAS_CONTENT_DIGEST: _tar_digest(layer), ORAS_UNPACK: "true"},
    )


def referrer_manifest(bundle: bytes, *, subject: Descriptor) -> bytes:
    """The manifest attaching the Sigstore ``bundle`` to ``subject``."""
    return _manifest(
        artifact_type=SIGSTORE_BUNDLE_MEDIA_TYPE,
        layer=Descriptor.of(SIGSTORE_BUNDLE_MEDIA_TYPE, bundle),
        annotations={},
        subject=subject,
    )


# --- the distribution API -------------------------------------------------------------------


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


class _Session:
    """Requests to one repository, with the credentials the registry asks for."""

    def __init__(self, target: oci.OciRef, credentials: Credentials | None) -> None:
        self.target = target
        self.credentials = credentials
        self.base = f"{oci._scheme(target)}://{target.registry}/v2/{target.repository}"
        self.netloc = urllib.parse.urlsplit(self.base).netloc
        self.authorization = ""

    def send(
        self,
        method: str,
        url: str,
        *,
        what: str,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> _Answer:
        challenged = False
        for _ in range(oci.MAX_REDIRECTS + 2):
            same_host = urllib.parse.urlsplit(url).netloc == self.netloc
            send = dict(headers or {})
            if self.authorization and same_host:
                send["Authorization"] = self.authorization
            try:
                response = oci._open(url, ref=self.target, headers=send, method=method, data=data)
            except oci.OciError as exc:
                raise OciPushError(exc.message) from None
            with response:
                status = response.status
                if status == 401 and same_host and not challenged:
                    challenged = True
                    self.authorization = self._authorize(
                        response.headers.get("WWW-Authenticate", "")
                    )
                    continue
                if status in (307, 308) or (status in (301, 302, 303) and method == "GET"):
                    location = response.headers.get("Location")
                    if not location:
                        raise OciPushError(f"registry redirect without a Location for {what}")
                    url = urllib.parse.urljoin(url, location)
                    continue
                try:
                    body = b"" if method == "HEAD" else oci._read(response, MAX_ANSWER_BYTES, what)
                except oci.OciError as exc:
                    raise OciPushError(exc.message) from None
                found = {k.lower(): v for k, v in response.headers.items()}
                return _Answer(status=status, headers=found, body=body)
        raise OciPushError(f"too many redirects for {what}")

    def _authorize(self, challenge: str) -> str:
        try:
            return oci.authorization(
                challenge,
                ref=self.target,
                action="push",
                what=f"to {self.target.repository}",
                login=self.credentials,
            )
        except oci.OciError as exc:
            raise OciPushError(exc.message) from None

    def refused(self, answer: _Answer, what: str) -> OciPushError:
        detail = ""
        try:
            doc = load_json(answer.body, what="registry error") if answer.body else None
        except JSONLimitError:
            doc = None
        errors = doc.get("errors") if isinstance(doc, dict) else None
        code = errors[0].get("code") if errors and isinstance(errors[0], dict) else None
        if isinstance(code, str) and _ERROR_CODE.fullmatch(code):
            detail = f" {code}"
        if answer.status in (401, 403):
            detail += " (the registry refused the credentials)"
        return OciPushError(
            f"registry {self.target.registry} answered HTTP {answer.status}{detail} to {what}"
        )

    def blob(self, media_type: str, content: bytes) -> Descriptor:
        descriptor = Descriptor.of(media_type, content)
        what = f"blob {descriptor.digest}"
        url = f"{self.base}/blobs/{descriptor.digest}"
        if self.send("HEAD", url, what=what).status == 200:
            return descriptor  # content-addressed: already there
        started = self.send(
            "POST", f"{self.base}/blobs/uploads/", what=f"upload of {what}", data=b""
        )
        location = started.headers.get("location", "")
        if started.status != 202 or not location:
            raise self.refused(started, f"the start of the upload of {what}")
        upload = urllib.parse.urljoin(self.base + "/", location)
        joiner = "&" if "?" in upload else "?"
        done = self.send(
            "PUT",
            f"{upload}{joiner}digest={urllib.parse.quote(descriptor.digest)}",
            what=f"upload of {what}",
            data=content,
            headers={"Content-Type": "application/octet-stream"},
        )
        if done.status != 201:
            raise self.refused(done, f"the upload of {what}")
        return descriptor

    def manifest(self, body: bytes, *, reference: str, media_type: str) -> _Answer:
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        answer = self.send(
            "PUT",
            f"{self.base}/manifests/{reference}",
            what=f"manifest {reference}",
            data=body,
            headers={"Content-Type": media_type},
        )
        if answer.status != 201:
            raise self.refused(answer, f"manifest {reference}")
        stored = answer.headers.get("docker-content-digest")
        if stored and stored != digest:
            raise OciPushError(
                f"registry {self.target.registry} stored manifest {reference} as {stored[:80]}, "
                f"not {digest}"
            )
        return answer

    def add_to_referrers_tag(self, subject: Descriptor, referrer: Descriptor) -> None:
        """The referrers tag schema (OCI distribution 1.1): the index tagged ``sha256-<hex>``
        lists ``referrer``, first. Read-modify-write: one subject is one run's artifact, pushed
        by one worker at a time, so no other writer races this index."""
        tag = subject.digest.replace(":", "-")
        url = f"{self.base}/manifests/{tag}"
        found = self.send(
            "GET", url, what=f"referrers tag {tag}", headers={"Accept": INDEX_MEDIA_TYPE}
        )
        manifests: list[Any] = []
        if found.status == 200:
            try:
                index = load_json(found.body, what="referrers index")
            except JSONLimitError as exc:
                raise OciPushError(f"referrers tag {tag}: {exc}") from None
            listed = index.get("manifests") if isinstance(index, dict) else None
            if not isinstance(listed, list):
                raise OciPushError(f"referrers tag {tag} is not an image index")
            manifests = listed
        elif found.status != 404:
            raise self.refused(found, f"referrers tag {tag}")
        if any(isinstance(m, dict) and m.get("digest") == referrer.digest for m in manifests):
            return
        # Newest first: readers take the first Sigstore bundle (``oci._referrer_bundle``), and
        # a re-push of the same artifact (a retry) must be read with its new signature.
        manifests.insert(0, referrer.as_json())
        body = json.dumps(
            {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests},
            separators=(",", ":"),
        ).encode()
        self.manifest(body, reference=tag, media_type=INDEX_MEDIA_TYPE)


@dataclass(frozen=True)
class PushedArtifact:
    reference: str  # registry/repository:tag, as AICR's pointer names it
    manifest: Descriptor

    @property
    def pinned(self) -> str:
        return self.reference.rpartition(":")[0] + "@" + self.manifest.digest


def push_artifact(
    target: oci.OciRef,
    *,
    files: Mapping[str, bytes],
    tag: str,
    annotations: Mapping[str, str],
    credentials: Credentials | None,
) -> PushedArtifact:
    """Push the evidence directory ``files`` as AICR's artifact, tagged ``tag``."""
    layer = directory_layer(files)
    body = artifact_manifest(layer, annotations=annotations)
    session = _Session(target, credentials)
    session.blob(EMPTY_CONFIG_MEDIA_TYPE, EMPTY_CONFIG)
    session.blob(LAYER_MEDIA_TYPE, layer)
    session.manifest(body, reference=tag, media_type=oci.OCI_MANIFEST)
    return PushedArtifact(
        reference=f"{target.registry}/{target.repository}:{tag}",
        manifest=Descriptor.of(oci.OCI_MANIFEST, body),
    )


def push_referrer(
    target: oci.OciRef,
    *,
    subject: Descriptor,
    bundle: bytes,
    credentials: Credentials | None,
) -> Descriptor:
    """Attach the Sigstore ``bundle`` to ``subject`` as a referrer; its manifest descriptor."""
    body = referrer_manifest(bundle, subject=subject)
    referrer = Descriptor.of(oci.OCI_MANIFEST, body, artifact_type=SIGSTORE_BUNDLE_MEDIA_TYPE)
    session = _Session(target, credentials)
    session.blob(EMPTY_CONFIG_MEDIA_TYPE, EMPTY_CONFIG)
    session.blob(SIGSTORE_BUNDLE_MEDIA_TYPE, bundle)
    answer = session.manifest(body, reference=referrer.digest, media_type=oci.OCI_MANIFEST)
    if answer.headers.get("oci-subject") != subject.digest:
        session.add_to_referrers_tag(subject, referrer)
    return referrer
