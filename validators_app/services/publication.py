"""A published run's evidence pushed to an OCI registry, ready to be contributed to AICR.

``push_run_evidence(run)`` is called once the run's evidence is stored (``runs.run_publish``)
and by ``manage.py push_run_evidence`` to retry. With ``RUN_EVIDENCE_OCI_REPOSITORY`` set it
does what ``aicr validate --emit-attestation --push`` does after the bundle is built (AICR
``pkg/evidence/attestation/emit.go`` ``signAndPush``, ``publish.go``):

1. push the unsigned evidence directory (recipe.yaml, snapshot, CTRF, BOM, manifest, the
   unsigned statement) as AICR's OCI artifact, tagged ``<recipe>-<run ID>``
   (``evidence_app.services.oci_push``);
2. sign a statement with the same predicate whose subject is that artifact
   (``<registry>/<repository>:<tag>`` and its manifest digest: AICR-V1.md §1), keyless when an
   identity token is configured, else with the site key (``evidence.site_sign``, one rule);
3. attach the Sigstore bundle as a referrer whose subject is the artifact's manifest;
4. pull it back through the site's own OCI pull and verify it as ``aicr evidence verify
   <ref>`` does (nothing stored): ``pushed`` is written only once that holds;
5. write the pointer AICR's repository takes, ``recipes/evidence/<recipe>/<src>/sha256-<d>.yaml``
   (schema 1.0.0, the signer block from the verified certificate). Key-signed evidence gets
   no pointer: AICR's allowlist lists keyless signers only, and the record says so.

A push never changes the run's verdict or its evidence. A failure is stored as ``failed`` with
its reason (no credential in it) and can be retried; evidence of a simulated cluster is never
pushed (``skipped``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evidence_app import pointers as pc
from evidence_app.attestation import BundleError, build_summary_bundle
from evidence_app.corroborate.gojson import marshal
from evidence_app.models import SignerKind
from evidence_app.services import oci, oci_push, pointers
from evidence_app.services.verify_result import INVALID, verify_pulled_ref
from evidence_app.verification.commands import KEY_SIGNED_UPSTREAM_NOTE
from validators_app.models import PushState, RunOciPublication, ValidationRun
from validators_app.services.evidence import PublishError, bundle_input, site_sign

logger = logging.getLogger(__name__)

TITLE = "AICR Recipe Evidence"
KEY_SIGNED_NO_POINTER = (
    "key-signed: it counts on this site only, and no pointer can be contributed upstream. "
    f"{KEY_SIGNED_UPSTREAM_NOTE} Configure SITE_SIGSTORE_IDENTITY_TOKEN to sign runs keyless."
)


class PushFailed(Exception):
    def __init__(self, message: str, **partial: str) -> None:
        super().__init__(message)
        self.message = message
        self.partial = partial  # what did reach the registry (reference, oci_ref)


def push_repository() -> str:
    return (getattr(settings, "RUN_EVIDENCE_OCI_REPOSITORY", "") or "").strip()


def run_tag(run: ValidationRun) -> str:
    """``<recipe>-<AICR run ID>``: one tag per run, so distinct runs never share one."""
    return f"{run.recipe.name[:90]}-{run.aicr_run_id}"


def artifact_statement(statement: dict[str, Any], *, name: str, digest: str) -> bytes:
    """``statement`` with the OCI artifact as its subject, the predicate unchanged."""
    subject = [{"name": name, "digest": {"sha256": digest.removeprefix("sha256:")}}]
    return marshal({**statement, "subject": subject})


# What a record holds when an attempt did not set it: a retry starts from nothing, so a field
# from an earlier attempt (an old pointer, a reason) is never shown beside a newer state.
_BLANK: dict[str, Any] = {
    "reference": "",
    "oci_ref": "",
    "referrer_digest": "",
    "keyless": False,
    "pointer_path": "",
    "pointer_yaml": "",
    "reason": "",
    "pushed_at": None,
}


@transaction.atomic
def _record(run: ValidationRun, *, state: str, repository: str, **fields: Any) -> RunOciPublication:
    # Locked: a retry and the publish step may both record for one run; one row, attempts
    # counted, whichever commits last is the state shown (each is a state that was reached).
    row = RunOciPublication.objects.select_for_update().filter(run=run).first()
    if row is None:
        row = RunOciPublication(run=run)
    for name, value in {**_BLANK, **fields}.items():
        setattr(row, name, value)
    row.state, row.repository = state, repository
    row.attempts += 1
    row.save()
    return row


def push_run_evidence(run: ValidationRun) -> RunOciPublication | None:
    """Push ``run``'s evidence (see the module docstring); None when nothing is to be pushed
    (no repository configured, or the run has no evidence). Never raises for a push failure."""
    repository = push_repository()
    if not repository or run.evidence_id is None:
        return None
    done = RunOciPublication.objects.filter(run=run, state=PushState.PUSHED).first()
    if done is not None:
        return done  # pushed and verified once: a second push would only re-sign the same
    if run.cluster.is_simulated:
        return _record(
            run,
            state=PushState.SKIPPED,
            repository=repository,
            reason="evidence from a simulated cluster is never pushed or contributed upstream",
        )
    try:
        return _push(run, repository)
    except PushFailed as exc:
        reason = exc.message
        partial = exc.partial
    except Exception as exc:  # a push is never allowed to undo a stored verdict
        logger.exception("validation run %s: pushing evidence failed unexpectedly", run.pk)
        reason, partial = f"internal error while pushing ({type(exc).__name__})", {}
    logger.warning("validation run %s: evidence not pushed: %s", run.pk, reason)
    return _record(
        run, state=PushState.FAILED, repository=repository, reason=reason[:2000], **partial
    )


def _push(run: ValidationRun, repository: str) -> RunOciPublication:
    try:
        target = oci.parse_oci_repository(repository, what="RUN_EVIDENCE_OCI_REPOSITORY")
        credentials = oci.registry_login(target)
        bundle = build_summary_bundle(bundle_input(run))
    except (oci.OciError, oci_push.OciPushError) as exc:
        raise PushFailed(exc.message) from None
    except (BundleError, PublishError) as exc:
        raise PushFailed(str(exc)) from None
    statement_doc = json.loads(bundle.statement)  # the bytes the builder just wrote
    predicate_type = statement_doc["predicateType"]
    try:
        artifact = oci_push.push_artifact(
            target,
            files=bundle.files,
            tag=run_tag(run),
            annotations={
                "org.opencontainers.image.title": TITLE,
                "org.opencontainers.image.version": run.aicr_version,
                "org.opencontainers.image.description": (
                    f"Signed evidence bundle for an aicr recipe ({predicate_type})."
                ),
            },
            credentials=credentials,
        )
    except oci_push.OciPushError as exc:
        raise PushFailed(f"pushing the evidence artifact failed: {exc.message}") from None
    pushed = {"reference": artifact.reference, "oci_ref": artifact.pinned}
    statement = artifact_statement(
        statement_doc, name=artifact.reference, digest=artifact.manifest.digest
    )
    try:
        signed = site_sign(statement)
        referrer = oci_push.push_referrer(
            target, subject=artifact.manifest, bundle=signed, credentials=credentials
        )
    except PublishError as exc:
        raise PushFailed(f"signing the pushed artifact failed: {exc}", **pushed) from None
    except oci_push.OciPushError as exc:
        raise PushFailed(f"attaching the signature failed: {exc.message}", **pushed) from None
    pushed["referrer_digest"] = referrer.digest
    result = verify_pulled_ref(oci.parse_oci_ref(artifact.pinned))
    if result.exit == INVALID:
        failed = next((s for s in result.steps if s.get("status") == "failed"), {})
        raise PushFailed(
            f"the pushed evidence does not verify at step {failed.get('name', '?')}: "
            f"{str(failed.get('detail', ''))[:500]}",
            **pushed,
        )
    fields: dict[str, Any] = {
        "state": PushState.PUSHED,
        "repository": repository,
        "pushed_at": timezone.now(),
        **pushed,
    }
    signer = result.signer or {}
    if not (signer.get("identity") and signer.get("issuer")):  # a key has no OIDC identity
        fields["reason"] = KEY_SIGNED_NO_POINTER
    else:
        pointer = _pointer(result.predicate or {}, signer, artifact, statement_doc)
        fields.update(
            keyless=True,
            pointer_path=pc.pointer_rel_path(pointer),
            pointer_yaml=pc.render_pointer(pointer),
        )
    return _record(run, **fields)


def _pointer(
    predicate: dict[str, Any],
    signer: dict[str, Any],
    artifact: oci_push.PushedArtifact,
    statement: dict[str, Any],
) -> pc.Pointer:
    """The pointer to ``artifact`` for the verified ``signer`` (AICR ``BuildPointer``: ``oci``
    is the tagged reference, ``digest`` the manifest digest)."""
    attested = datetime.strptime(predicate["attestedAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return pc.Pointer(
        recipe=predicate["recipe"]["name"],
        profile=pointers.pointer_profile(statement.get("predicate") or {}),
        attested_at=attested,
        oci=artifact.reference,
        digest=artifact.manifest.digest,
        predicate_type=predicate["type"],
        signer=pc.PointerSigner(
            identity=signer["identity"],
            issuer=signer["issuer"],
            rekor_log_index=signer.get("rekorLogIndex"),
        ),
    )


# --- what the run page says -----------------------------------------------------------------


@dataclass(frozen=True)
class Contribution:
    """The "Contribute upstream" block of a run page: what reached the registry and AICR."""

    publication: RunOciPublication | None
    key_signed: bool
    repository: str  # where pushes go now ("" = none configured)
    note: str  # why nothing can be contributed, when so

    @property
    def verify_commands(self) -> list[str]:
        publication = self.publication
        if publication is None or publication.state != PushState.PUSHED:
            return []
        commands = [f"aicr evidence verify {publication.oci_ref}"]
        if publication.pointer_path:
            commands.append(f"aicr evidence verify {publication.pointer_path}")
        return commands


def run_contribution(run: ValidationRun) -> Contribution | None:
    """What the run page says about upstream contribution (None: nothing was published)."""
    evidence = run.evidence
    if evidence is None:
        return None
    publication = RunOciPublication.objects.filter(run=run).first()
    key_signed = evidence.signer.kind == SignerKind.KEY
    note = ""
    if run.cluster.is_simulated:
        note = "Evidence from a simulated cluster is never pushed or contributed upstream."
    elif key_signed:
        note = f"Key-signed: it counts on this site only. {KEY_SIGNED_UPSTREAM_NOTE}"
    return Contribution(
        publication=publication, key_signed=key_signed, repository=push_repository(), note=note
    )
