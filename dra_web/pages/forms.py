"""Forms of the pages: upload snapshot files, start a run with options, review a pod."""

from __future__ import annotations

import re

from django import forms

from allocator.features.gates import GATE_NAMES
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


class RunForm(forms.Form):
    snapshot = forms.IntegerField(widget=forms.HiddenInput, required=False)
    timeout = forms.FloatField(
        min_value=0.01,
        max_value=600,
        initial=5.0,
        label="DFS timeout (seconds per Allocate)",
    )
    gates = forms.MultipleChoiceField(
        choices=[(g, g) for g in GATE_NAMES],
        required=False,
        initial=list(GATE_NAMES),
        widget=forms.CheckboxSelectMultiple,
        label="Feature gates",
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

    def options(self) -> dict:
        data = self.cleaned_data
        enabled = set(data.get("gates") or [])
        disrupt = [n for n in re.split(r"[,\s]+", data.get("disrupt") or "") if n]
        for node in data.get("disrupt_nodes") or []:
            if node not in disrupt:
                disrupt.append(node)
        return {
            "timeout": data["timeout"],
            "featureGates": {g: g in enabled for g in GATE_NAMES},
            "disrupt": disrupt,
            "trace": bool(data.get("trace")),
        }


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
