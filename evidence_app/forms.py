"""Forms of the evidence pages: upload (a bundle or an OCI reference) and withdrawal.

They validate and normalise; verifying the upload is the ingest service's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from evidence_app.services import oci
from evidence_app.services.ingest import max_upload_bytes

MAX_FILENAME = 255
MAX_OCI_REF = 500


@dataclass(frozen=True)
class UploadedBytes:
    """An uploaded file read into memory (bounded by the form), with its given name."""

    name: str
    data: bytes


def _read(upload: UploadedFile | None, what: str) -> UploadedBytes | None:
    if upload is None:
        return None
    limit = max_upload_bytes()
    if upload.size is not None and upload.size > limit:
        raise forms.ValidationError(
            f"The {what} is {upload.size:,} bytes; the limit is {limit:,} bytes."
        )
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise forms.ValidationError(f"The {what} is larger than the limit of {limit:,} bytes.")
    if not data:
        raise forms.ValidationError(f"The {what} is empty.")
    return UploadedBytes(name=(upload.name or "")[:MAX_FILENAME], data=data)


class EvidenceUploadForm(forms.Form):
    bundle = forms.FileField(
        required=False,
        label="Evidence",
        widget=forms.FileInput(
            attrs={"accept": ".json,.jsonl,.tar,.gz,.tgz,application/json,application/gzip"}
        ),
        help_text="A Sigstore bundle (.sigstore.json) or an AICR evidence directory packed "
        "as .tar / .tar.gz (summary-bundle with attestation.intoto.jsonl).",
    )
    artifact = forms.FileField(
        required=False,
        widget=forms.FileInput(),
        label="Artifact (optional)",
        help_text="The signed artifact, for a bundle whose subject is a file (e.g. recipe.yaml).",
    )
    oci_ref = forms.CharField(
        required=False,
        max_length=MAX_OCI_REF,
        label="…or an OCI reference",
        help_text="Pinned by digest, e.g. ghcr.io/org/aicr-evidence@sha256:…; a worker pulls it.",
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "spellcheck": "false", "inputmode": "url"}
        ),
    )

    def clean_bundle(self) -> UploadedBytes | None:
        return _read(self.cleaned_data.get("bundle"), "evidence file")

    def clean_artifact(self) -> UploadedBytes | None:
        return _read(self.cleaned_data.get("artifact"), "artifact")

    def clean_oci_ref(self) -> str:
        """The reference, pinned form; its syntax is checked without any network."""
        ref = (self.cleaned_data.get("oci_ref") or "").strip()
        if not ref:
            return ""
        try:
            return oci.parse_oci_ref(ref).pinned
        except oci.OciError as exc:
            raise forms.ValidationError(exc.message) from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        bundle, ref = cleaned.get("bundle"), cleaned.get("oci_ref")
        if self.errors:
            return cleaned
        if bundle is None and not ref:
            raise forms.ValidationError("Choose an evidence file, or give an OCI reference.")
        if bundle is not None and ref:
            raise forms.ValidationError("Give either an evidence file or an OCI reference.")
        if cleaned.get("artifact") is not None and bundle is None:
            self.add_error("artifact", "An artifact goes with an uploaded evidence file.")
        return cleaned


class WithdrawForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        strip=True,
        label="Reason",
        help_text="Shown next to the evidence, struck through, for everyone.",
        widget=forms.Textarea(attrs={"rows": 3}),
    )
