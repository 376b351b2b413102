"""The ``/check/`` form: a snapshot pasted or uploaded, plus the criteria a snapshot cannot tell."""

from __future__ import annotations

from typing import Any

from django import forms

from .snapshot_input import MAX_SNAPSHOT_BYTES

CRITERIA_HELP = "Leave blank to use what the snapshot tells (service, accelerator, OS)."


class SnapshotCheckForm(forms.Form):
    snapshot_text = forms.CharField(
        label="Snapshot (YAML)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false", "autocomplete": "off"}),
        help_text="The output of aicr snapshot (or a validation run's snapshot).",
    )
    snapshot_file = forms.FileField(label="…or upload the file", required=False)
    service = forms.CharField(required=False, max_length=100, help_text=CRITERIA_HELP)
    accelerator = forms.CharField(required=False, max_length=100)
    os = forms.CharField(label="OS", required=False, max_length=100)
    intent = forms.CharField(
        required=False, max_length=100, help_text="A snapshot never tells intent or platform."
    )
    platform = forms.CharField(required=False, max_length=100)
    profile = forms.CharField(
        required=False,
        max_length=200,
        help_text="A profile selection such as gpuStack=operator-managed (default: its default).",
    )

    def clean_snapshot_file(self) -> bytes | None:
        upload = self.cleaned_data.get("snapshot_file")
        if upload is None:
            return None
        if upload.size is not None and upload.size > MAX_SNAPSHOT_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; the limit is {MAX_SNAPSHOT_BYTES:,} bytes."
            )
        data: bytes = upload.read(MAX_SNAPSHOT_BYTES + 1)
        if len(data) > MAX_SNAPSHOT_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_SNAPSHOT_BYTES:,} bytes.")
        return data

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        text, data = cleaned.get("snapshot_text"), cleaned.get("snapshot_file")
        if self.errors:
            return cleaned
        if text and data is not None:
            raise forms.ValidationError("Paste the snapshot or upload it, not both.")
        if not text and data is None:
            raise forms.ValidationError("Paste a snapshot or upload its file.")
        cleaned["snapshot"] = data if data is not None else text
        return cleaned

    def criteria(self) -> dict[str, str]:
        return {
            dim: self.cleaned_data[dim]
            for dim in ("service", "accelerator", "os", "intent", "platform")
            if self.cleaned_data.get(dim)
        }
