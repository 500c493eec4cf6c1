"""Forms of the pages: upload snapshot files, start a run with options, review a pod."""

from __future__ import annotations

import re

from django import forms

from allocator.featuregates import GATE_NAMES, KUBERNETES_VERSIONS
from dra_web.reviews.models import Review
from dra_web.snapshots.forms import CatalogForm


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        files = [f for f in files if f]
        if not files:
            raise forms.ValidationError("Choose at least one YAML or JSON file.")
        return [super(MultipleFileField, self).clean(f, initial) for f in files]


class UploadForm(CatalogForm):
    files = MultipleFileField(
        label="Snapshot files",
        help_text="kubectl get -o yaml / -o json output and InstanceType documents; several files are merged.",
    )
    name = forms.CharField(max_length=200, required=False, label="Name")


# The run form's Kubernetes version: "auto" leaves it to the snapshot (a live import's server
# version, else every gate on), "all" asks for every gate on, or a release's preset.
VERSION_AUTO, VERSION_ALL = "auto", "all"
GATE_DEFAULT, GATE_ON, GATE_OFF = "", "on", "off"


def gate_field(name: str) -> str:
    return f"gate-{name}"


class RunForm(forms.Form):
    snapshot = forms.IntegerField(widget=forms.HiddenInput, required=False)
    timeout = forms.FloatField(
        min_value=0.01,
        max_value=600,
        initial=5.0,
        label="DFS timeout (seconds per Allocate)",
    )
    kubernetes_version = forms.ChoiceField(
        choices=[(VERSION_AUTO, VERSION_AUTO), (VERSION_ALL, VERSION_ALL)]
        + [(v, v) for v in KUBERNETES_VERSIONS],
        required=False,
        initial=VERSION_AUTO,
        label="Kubernetes version",
    )
    disrupt = forms.CharField(
        required=False,
        label="Disruption candidates",
        help_text="Node names to consolidate, separated by commas or spaces.",
    )
    disrupt_nodes = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    trace = forms.BooleanField(required=False, initial=True, label="Record the search trace")

    def __init__(self, *args, nodes: list[str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["disrupt_nodes"].choices = [(n, n) for n in nodes or []]
        for name in GATE_NAMES:  # each gate: the version's default, or set on or off
            self.fields[gate_field(name)] = forms.ChoiceField(
                choices=[(GATE_DEFAULT, "default"), (GATE_ON, "on"), (GATE_OFF, "off")],
                required=False,
                label=name,
            )

    def options(self) -> dict:
        data = self.cleaned_data
        disrupt = [n for n in re.split(r"[,\s]+", data.get("disrupt") or "") if n]
        for node in data.get("disrupt_nodes") or []:
            if node not in disrupt:
                disrupt.append(node)
        options = {
            "timeout": data["timeout"],
            "featureGates": {
                name: data[gate_field(name)] == GATE_ON
                for name in GATE_NAMES
                if data.get(gate_field(name)) in (GATE_ON, GATE_OFF)
            },
            "disrupt": disrupt,
            "trace": bool(data.get("trace")),
        }
        version = data.get("kubernetes_version") or VERSION_AUTO
        if version != VERSION_AUTO:  # auto: the snapshot decides (runs.services.start_run)
            options["kubernetesVersion"] = None if version == VERSION_ALL else version
        return options


class CommentForm(forms.Form):
    body = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What did you find?"}),
        label="Comment",
        max_length=10_000,
        required=False,
    )
    verdict = forms.ChoiceField(
        choices=[("", "— keep —")] + Review.VERDICTS, required=False, label="Verdict"
    )
    state = forms.ChoiceField(
        choices=[("", "— keep —")] + Review.STATES, required=False, label="State"
    )

    def clean(self):
        data = super().clean()
        if (
            not (data.get("body") or "").strip()
            and not data.get("verdict")
            and not data.get("state")
        ):
            raise forms.ValidationError("Write a comment or choose a verdict.")
        return data
