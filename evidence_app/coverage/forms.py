"""The ``/check/`` form: a snapshot pasted or uploaded, plus the criteria a snapshot cannot tell.

The criteria are selects of the current catalog's values (``guidance.criteria_choices``) with
an "any" that states nothing; the API (``api/check.py``) keeps taking free text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from .service import STATED_DIMENSIONS
from .snapshot_input import MAX_SNAPSHOT_BYTES

CRITERIA_HELP = "Leave at “any” to use what the snapshot tells (service, accelerator, OS)."
DERIVED = ("service", "accelerator", "os")


class CriterionField(forms.ChoiceField):
    """A criteria dimension: one of the catalog's values, or "" for any. A value the catalog
    does not accept is refused naming the field and a few of the values it does accept."""

    def __init__(self, *, dimension: str, **kwargs: Any) -> None:
        self.dimension = dimension
        super().__init__(required=False, **kwargs)

    def set_values(self, values: list[str]) -> None:
        empty = "any (from the snapshot)" if self.dimension in DERIVED else "any"
        self.choices = [("", empty), *((v, v) for v in values)]
        self.values = values

    def validate(self, value: Any) -> None:
        if value and value not in self.values:
            shown = ", ".join(self.values[:12]) + (", …" if len(self.values) > 12 else "")
            raise forms.ValidationError(
                f"{self.dimension} {str(value)[:100]!r} is not a value the current catalog "
                f"accepts (one of: {shown or 'none: no catalog imported'}).",
                code="invalid_choice",
            )


class SnapshotCheckForm(forms.Form):
    snapshot_text = forms.CharField(
        label="Snapshot (YAML)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false", "autocomplete": "off"}),
        help_text="The output of aicr snapshot (or a validation run's snapshot).",
    )
    snapshot_file = forms.FileField(label="…or upload the file", required=False)
    service = CriterionField(dimension="service", help_text=CRITERIA_HELP)
    accelerator = CriterionField(dimension="accelerator")
    os = CriterionField(dimension="os", label="OS")
    intent = CriterionField(
        dimension="intent", help_text="A snapshot never tells intent or platform."
    )
    platform = CriterionField(dimension="platform")
    profile = forms.CharField(
        required=False,
        max_length=200,
        help_text="A profile selection such as gpuStack=operator-managed (default: its default).",
    )

    def __init__(self, *args: Any, criteria_values: Mapping[str, list[str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for dimension in STATED_DIMENSIONS:
            field = self.fields[dimension]
            assert isinstance(field, CriterionField)
            field.set_values(list(criteria_values.get(dimension, [])))

    def criteria_fields(self) -> list[forms.BoundField]:
        return [self[d] for d in (*STATED_DIMENSIONS, "profile")]

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
            dim: self.cleaned_data[dim] for dim in STATED_DIMENSIONS if self.cleaned_data.get(dim)
        }
