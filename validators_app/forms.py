"""Forms of the cluster pages. They validate the shape of the input; the registration service
(``services.clusters``) checks the kubeconfig and the name, and its refusals land on the form."""

from __future__ import annotations

from django import forms

from validators_app.kubeconfig import MAX_KUBECONFIG_BYTES
from validators_app.models import Environment


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
