"""Snapshot form fields: adding the AWS GPU catalog to an upload."""

from __future__ import annotations

from django import forms
from django.core.files.uploadedfile import SimpleUploadedFile

from allocator.catalog import aws
from dra_web.snapshots import services


class CatalogForm(forms.Form):
    """A region (and families) of the AWS catalog to upload with the snapshot files.

    When a region is chosen, the catalog's InstanceType documents are added to the upload as
    one more file, ``catalog-aws-<region>.yaml``, so that the stored snapshot keeps them like
    the user's own files (and shows them under the InstanceType kind)."""

    catalog_region = forms.ChoiceField(
        choices=[("", "no catalog")] + [(r, r) for r in aws.regions()],
        required=False,
        label="AWS region",
    )
    catalog_families = forms.MultipleChoiceField(
        choices=[(f, f) for f in aws.families()],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Instance families",
        help_text="None chosen: every family of the catalog.",
    )
    catalog_mig = forms.BooleanField(
        required=False,
        initial=True,
        label="MIG partitions",
        help_text="Publish A100/H100/H200/B200 MIG partitions as the GPU driver's DynamicMIG "
        "mode does; off: full GPUs only.",
    )

    def clean(self):
        data = super().clean()
        region = data.get("catalog_region")
        if not region:
            return data
        families = data.get("catalog_families") or None
        try:
            name, content = services.catalog_file(
                region, families, mig=bool(data.get("catalog_mig"))
            )
        except services.SnapshotUploadError as err:
            raise forms.ValidationError(err.problems) from None
        if "files" in data:
            data["files"] = [*data["files"], SimpleUploadedFile(name, content)]
        return data
