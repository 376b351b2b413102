"""Forms of the cluster pages. They validate the shape of the input; the cluster services
(``services.clusters``) check the kubeconfig, the name and the settings, and their refusals
land on the form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput, JSONString

from evidence_app.verification._json import JSONLimitError, JSONLimits, load_json
from validators_app.kubeconfig import MAX_KUBECONFIG_BYTES
from validators_app.models import Cluster, Environment, NcclFabric
from validators_app.services import clusters


class ClusterRegisterForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="Unique. Letters, digits, '.', '_' or '-'.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    environment = forms.ChoiceField(
        choices=Environment.choices,
        widget=forms.RadioSelect,
        help_text="Simulated clusters are test doubles: their runs are labelled simulated and "
        "never count.",
    )
    kubeconfig = forms.CharField(
        strip=False,
        max_length=MAX_KUBECONFIG_BYTES,
        widget=forms.Textarea(
            attrs={"rows": 14, "autocomplete": "off", "spellcheck": "false", "class": "mono"}
        ),
        help_text="Embedded credentials only: a token, client-certificate-data + client-key-data, "
        "or username + password. exec/auth-provider plugins and file paths are refused. Real "
        "clusters need https with certificate verification. Stored encrypted; never shown again.",
    )


# A setting is at most a list of 32 tolerations (two levels: list, object) or 32 labels.
_SETTING_LIMITS = JSONLimits(max_bytes=64 * 1024, max_depth=2, max_object_keys=40)


class SettingJSONField(forms.JSONField):
    """A JSON form field decoded by the bounded loader (depth, size, keys, number length, NUL)
    when it is cleaned and when a refused value is shown again, so a pasted document costs no
    more than the API's body would."""

    def _load(self, value: Any) -> Any:
        return load_json(str(value), what="JSON", limits=_SETTING_LIMITS)

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values:
            return None
        if isinstance(value, list | dict | int | float | JSONString):
            return value
        try:
            converted = self._load(value)
        except JSONLimitError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return self._load(data)
        except JSONLimitError:
            return InvalidJSONInput(data)


# The service's settings, the write-only token followed by its "clear" box.
SETTINGS_FIELDS = tuple(
    name
    for setting in clusters.SETTING_FIELDS
    for name in ((setting, "clear_hf_token") if setting == "hf_token" else (setting,))
)


class ClusterSettingsForm(forms.Form):
    """A cluster's scheduling settings and check inputs (the cluster page and the admin).
    Shapes only: ``services.clusters.settings_check`` checks the values, and its refusals land
    on the field they name (``add_service_error``)."""

    image_pull_secrets = SettingJSONField(
        required=False,
        help_text='JSON list of Secret names in the run\'s namespace, e.g. ["regcred"].',
    )
    node_selector = SettingJSONField(
        required=False,
        help_text="JSON label map: the snapshot agent's nodeSelector and AICR_NODE_SELECTOR, "
        'e.g. {"nodepool": "gpu"}.',
    )
    tolerations = SettingJSONField(
        required=False,
        help_text="JSON list of Kubernetes tolerations for the inner workloads (AICR_TOLERATIONS).",
    )
    agent_tolerations = SettingJSONField(
        required=False,
        help_text="JSON list of the snapshot agent's tolerations. Empty (null) = AICR's default, "
        "tolerate every taint; [] = none.",
    )
    hf_token = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="HF_TOKEN for inference-perf. Stored encrypted; never shown. Leave empty to "
        "keep the stored one.",
    )
    clear_hf_token = forms.BooleanField(required=False, help_text="Remove the stored HF token.")
    nccl_fabric = forms.ChoiceField(choices=NcclFabric.choices, required=False)
    require_scoped_inference_gateway = forms.BooleanField(required=False)
    inference_perf_no_cleanup = forms.BooleanField(required=False)

    def initial_from(self, cluster: Cluster) -> None:
        for name in clusters.SETTING_FIELDS:
            if name != "hf_token":  # write-only: never an initial value
                self.initial[name] = getattr(cluster, name)

    def settings_from(self, data: dict[str, Any]) -> dict[str, Any]:
        """The service's settings from the cleaned form: the whole state except the token,
        which changes only when typed in or cleared."""
        settings = {
            "image_pull_secrets": data.get("image_pull_secrets"),
            "node_selector": data.get("node_selector"),
            "tolerations": data.get("tolerations"),
            "agent_tolerations": data.get("agent_tolerations"),
            "nccl_fabric": data.get("nccl_fabric") or "",
            "require_scoped_inference_gateway": bool(data.get("require_scoped_inference_gateway")),
            "inference_perf_no_cleanup": bool(data.get("inference_perf_no_cleanup")),
        }
        if data.get("hf_token"):
            settings["hf_token"] = data["hf_token"]
        elif data.get("clear_hf_token"):
            settings["hf_token"] = ""
        return settings

    def add_service_error(self, exc: clusters.ClusterRegistrationError) -> None:
        field = exc.field if exc.field in self.fields else None
        self.add_error(field, exc.message)
