"""The AWS catalog's InstanceType documents: figures against EC2's published instance data,
Karpenter's labels, offerings and prices per region, and that they load as snapshot objects."""

from __future__ import annotations

import pytest

from allocator.catalog import aws
from allocator.snapshot import load_documents


def _doc(region: str, name: str, **options) -> dict:
    family = aws.family_of(name)
    docs = aws.instance_types(region, [family], aws.CatalogOptions(**options))
    return next(d for d in docs if d["metadata"]["name"] == name)


def _labels(doc: dict) -> dict[str, str]:
    return {
        r["key"]: r["values"][0]
        for r in doc["spec"]["requirements"]
        if r["operator"] == "In" and len(r["values"]) == 1
    }


def _operators(doc: dict) -> dict[str, str]:
    return {r["key"]: r["operator"] for r in doc["spec"]["requirements"]}


def _devices(doc: dict, driver: str = "gpu.nvidia.com") -> list[dict]:
    templates = doc["spec"].get("dynamicResources", {}).get("resourceSliceTemplates", [])
    return [d for t in templates if t["driver"] == driver for d in t["devices"]]


def _full_gpus(doc: dict) -> list[dict]:
    return [d for d in _devices(doc) if d["attributes"]["type"]["string"] == "gpu"]


# EC2's published figures (vCPUs, memory GiB, GPUs, GPU model, GPU memory GiB).
EC2_FIGURES = [
    ("p4d.24xlarge", 96, 1152, 8, "NVIDIA A100-SXM4-40GB", "40Gi"),
    ("p4de.24xlarge", 96, 1152, 8, "NVIDIA A100-SXM4-80GB", "80Gi"),
    ("p5.48xlarge", 192, 2048, 8, "NVIDIA H100 80GB HBM3", "80Gi"),
    ("p5.4xlarge", 16, 256, 1, "NVIDIA H100 80GB HBM3", "80Gi"),
    ("p5e.48xlarge", 192, 2048, 8, "NVIDIA H200", "141Gi"),
    ("p5en.48xlarge", 192, 2048, 8, "NVIDIA H200", "141Gi"),
    ("p6-b200.48xlarge", 192, 2048, 8, "NVIDIA B200", "183359Mi"),
    ("g4dn.xlarge", 4, 16, 1, "Tesla T4", "16Gi"),
    ("g4dn.12xlarge", 48, 192, 4, "Tesla T4", "16Gi"),
    ("g4dn.metal", 96, 384, 8, "Tesla T4", "16Gi"),
    ("g5.xlarge", 4, 16, 1, "NVIDIA A10G", "22888Mi"),
    ("g5.48xlarge", 192, 768, 8, "NVIDIA A10G", "22888Mi"),
    ("g6.xlarge", 4, 16, 1, "NVIDIA L4", "22888Mi"),
    ("g6.48xlarge", 192, 768, 8, "NVIDIA L4", "22888Mi"),
    ("g6e.xlarge", 4, 32, 1, "NVIDIA L40S", "45776Mi"),
    ("g6e.48xlarge", 192, 1536, 8, "NVIDIA L40S", "45776Mi"),
    ("gr6.4xlarge", 16, 128, 1, "NVIDIA L4", "22888Mi"),
]


@pytest.mark.parametrize(
    ("name", "vcpus", "memory_gib", "gpus", "model", "gpu_memory"), EC2_FIGURES
)
def test_gpu_instance_types_carry_ec2_figures(name, vcpus, memory_gib, gpus, model, gpu_memory):
    doc = _doc("us-east-1", name)
    labels = _labels(doc)
    assert labels["karpenter.k8s.aws/instance-cpu"] == str(vcpus)
    assert labels["karpenter.k8s.aws/instance-memory"] == str(memory_gib * 1024)
    assert labels["karpenter.k8s.aws/instance-gpu-count"] == str(gpus)
    full = _full_gpus(doc)
    assert [d["name"] for d in full] == [f"gpu-{i}" for i in range(gpus)]
    assert {d["attributes"]["productName"]["string"] for d in full} == {model}
    assert {d["capacity"]["memory"]["value"] for d in full} == {gpu_memory}
    # Allocatable is less than the instance: Karpenter subtracts its overhead.
    cpu_milli = int(doc["spec"]["capacity"]["cpu"].removesuffix("m"))
    assert vcpus * 1000 - 1000 < cpu_milli < vcpus * 1000


@pytest.mark.parametrize(
    ("name", "devices", "accelerator"),
    [
        ("trn1.2xlarge", 1, "trainium"),
        ("trn1.32xlarge", 16, "trainium"),
        ("trn1n.32xlarge", 16, "trainium"),
        ("trn2.48xlarge", 16, "trainium2"),
        ("inf2.xlarge", 1, "inferentia2"),
        ("inf2.8xlarge", 1, "inferentia2"),
        ("inf2.24xlarge", 6, "inferentia2"),
        ("inf2.48xlarge", 12, "inferentia2"),
    ],
)
def test_neuron_instance_types_publish_one_device_per_neuron_device(name, devices, accelerator):
    doc = _doc("us-east-1", name)
    labels = _labels(doc)
    assert labels["karpenter.k8s.aws/instance-accelerator-name"] == accelerator
    assert labels["karpenter.k8s.aws/instance-accelerator-count"] == str(devices)
    found = _devices(doc, "neuron.aws.com")
    assert [d["name"] for d in found] == [f"neurondevice{i}" for i in range(devices)]
    assert {d["attributes"]["instanceType"]["string"] for d in found} == {name}


def test_every_size_of_every_family_is_there():
    names = aws.instance_type_names()
    for family, sizes in {
        "p5": ["p5.4xlarge", "p5.48xlarge"],
        "g6e": [f"g6e.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge")],
        "g6f": ["g6f.large", "g6f.xlarge", "g6f.2xlarge", "g6f.4xlarge"],
        "inf2": ["inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge"],
    }.items():
        assert set(sizes) <= {n for n in names if aws.family_of(n) == family}
    required = [
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "p6-b200",
        "g4dn",
        "g5",
        "g6",
        "g6e",
        "g6f",
        "gr6",
        "trn1",
        "trn2",
        "inf2",
    ]
    assert set(required) <= set(aws.families())


def test_requirements_are_karpenters_labels_plus_the_region():
    labels = _labels(_doc("us-west-2", "g6e.12xlarge"))
    assert labels["node.kubernetes.io/instance-type"] == "g6e.12xlarge"
    assert labels["kubernetes.io/arch"] == "amd64" and labels["kubernetes.io/os"] == "linux"
    assert labels["karpenter.k8s.aws/instance-family"] == "g6e"
    assert labels["karpenter.k8s.aws/instance-category"] == "g"
    assert labels["karpenter.k8s.aws/instance-generation"] == "6"
    assert labels["karpenter.k8s.aws/instance-size"] == "12xlarge"
    assert labels["karpenter.k8s.aws/instance-gpu-name"] == "l40s"
    assert labels["karpenter.k8s.aws/instance-gpu-manufacturer"] == "nvidia"
    assert labels["karpenter.k8s.aws/instance-network-bandwidth"] == "100000"
    assert labels["topology.kubernetes.io/region"] == "us-west-2"
    assert _labels(_doc("us-west-2", "g5g.xlarge"))["kubernetes.io/arch"] == "arm64"


def test_labels_that_do_not_apply_are_does_not_exist_as_karpenter_sets_them():
    neuron = _operators(_doc("us-east-1", "trn1.32xlarge"))
    assert neuron["karpenter.k8s.aws/instance-gpu-name"] == "DoesNotExist"
    assert neuron["karpenter.k8s.aws/instance-gpu-count"] == "DoesNotExist"
    assert neuron["node.kubernetes.io/windows-build"] == "DoesNotExist"
    gpu = _operators(_doc("us-east-1", "g5.xlarge"))
    assert gpu["karpenter.k8s.aws/instance-accelerator-name"] == "DoesNotExist"
    assert gpu["karpenter.k8s.aws/instance-gpu-name"] == "In"
    tenancy = next(
        r
        for r in _doc("us-east-1", "g5.xlarge")["spec"]["requirements"]
        if r["key"] == "karpenter.k8s.aws/instance-tenancy"
    )
    assert tenancy["values"] == ["default", "dedicated"]


def test_capacity_leaves_out_the_device_plugin_resources_unless_asked():
    doc = _doc("us-east-1", "p5.48xlarge")
    assert doc["spec"]["capacity"] == {
        "cpu": "191450m",
        "ephemeral-storage": "17Gi",
        "memory": "1938410Mi",
        "pods": "100",
        "vpc.amazonaws.com/efa": "32",
        "vpc.amazonaws.com/pod-eni": "120",
    }
    plugin = _doc("us-east-1", "p5.48xlarge", device_plugin_resources=True)
    assert plugin["spec"]["capacity"]["nvidia.com/gpu"] == "8"
    trn = _doc("us-east-1", "trn1.32xlarge", device_plugin_resources=True)
    assert trn["spec"]["capacity"]["aws.amazon.com/neuron"] == "16"


def test_offerings_cover_every_zone_and_capacity_type_at_karpenters_price():
    doc = _doc("us-west-2", "p5.48xlarge")
    offerings = doc["spec"]["offerings"]
    assert {(o["zone"], o["capacityType"]) for o in offerings} == {
        (f"us-west-2{z}", ct) for z in "abcd" for ct in ("on-demand", "spot")
    }
    # us-west-2 has no static price table in Karpenter: its us-east-1 fallback, said so.
    assert {o["price"] for o in offerings} == {55.04}
    assert "fallback for us-west-2" in doc["metadata"]["annotations"][aws.ANNOTATION_PRICES]
    gov = _doc("us-gov-west-1", "p5.48xlarge", capacity_types=("on-demand",))
    assert {o["price"] for o in gov["spec"]["offerings"]} == {66.048}
    assert {o["capacityType"] for o in gov["spec"]["offerings"]} == {"on-demand"}


def test_a_type_without_a_price_has_no_offering_and_says_why():
    doc = _doc("us-east-1", "trn2.48xlarge")
    assert doc["spec"]["offerings"] == []
    assert "Capacity Blocks" in doc["metadata"]["annotations"][aws.ANNOTATION_NOTE]


def test_govcloud_sells_only_the_types_it_prices():
    names = [d["metadata"]["name"] for d in aws.instance_types("us-gov-east-1", ["g4dn", "g6"])]
    assert "g6.xlarge" in names and "g4dn.metal" not in names
    with pytest.raises(aws.CatalogError, match="trn1: not sold in us-gov-east-1"):
        aws.instance_types("us-gov-east-1", ["trn1"])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: aws.instance_types("eu-west-9"), "unknown region 'eu-west-9'"),
        (lambda: aws.instance_types("us-west-2", ["p5", "x9"]), "unknown family 'x9'"),
        (lambda: aws.instance_types("us-west-2", [" ", ""]), "no family given"),
        (
            lambda: aws.instance_types(
                "us-west-2", ["p5"], aws.CatalogOptions(capacity_types=("reserved",))
            ),
            "unknown capacity type 'reserved'",
        ),
    ],
)
def test_bad_input_is_a_catalog_error_naming_it(call, message):
    with pytest.raises(aws.CatalogError, match=message):
        call()


def test_documents_load_as_instance_types():
    docs = aws.instance_types("us-west-2")
    loaded = load_documents([("InstanceType", d) for d in docs])
    assert set(loaded.instance_types) == {d["metadata"]["name"] for d in docs}
    p5 = loaded.instance_types["p5.48xlarge"]
    assert len(p5.resource_slice_templates) == 8  # one per GPU, each with its counter set
    assert sum(len(t.devices) for t in p5.resource_slice_templates) == 8 * 26
    assert loaded.warnings == []


def test_names_restrict_the_documents_to_those_types():
    options = aws.CatalogOptions(names=frozenset({"p5.48xlarge", "g6e.xlarge"}))
    docs = aws.instance_types("us-west-2", None, options)
    assert [d["metadata"]["name"] for d in docs] == ["g6e.xlarge", "p5.48xlarge"]


def test_device_classes_are_the_drivers_own():
    classes = {c["metadata"]["name"]: c for c in aws.device_classes()}
    assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com", "neuron.aws.com"}
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    only = aws.device_classes(aws.drivers_of(aws.instance_types("us-east-1", ["inf2"])))
    assert [c["metadata"]["name"] for c in only] == ["neuron.aws.com"]


def test_the_data_says_where_its_figures_come_from():
    data = aws.load_data()
    assert data["sources"]["instanceTypes"]["repository"] == "github.com/aws/karpenter-provider-aws"
    assert "generate_aws_catalog.py" in data["regenerate"]
    for model in data["gpuModels"].values():
        assert model["source"]
        if "mig" in model:
            assert model["mig"]["source"]


def test_documents_are_built_afresh_and_share_nothing_with_the_data():
    first = _doc("us-east-1", "p5.48xlarge")
    first["spec"]["capacity"]["cpu"] = "1"
    it_req = next(r for r in first["spec"]["requirements"] if r["key"] == aws.REGION_LABEL)
    it_req["values"].append("changed")
    template = first["spec"]["dynamicResources"]["resourceSliceTemplates"][0]
    template["devices"][0]["attributes"]["productName"]["string"] = "changed"
    template["sharedCounters"][0]["counters"]["memory"]["value"] = "1Mi"
    again = _doc("us-east-1", "p5.48xlarge")
    assert again["spec"]["capacity"]["cpu"] == "191450m"
    again_req = next(r for r in again["spec"]["requirements"] if r["key"] == aws.REGION_LABEL)
    assert again_req["values"] == ["us-east-1"]
    again_template = again["spec"]["dynamicResources"]["resourceSliceTemplates"][0]
    assert again_template["devices"][0]["attributes"]["productName"]["string"] != "changed"
    assert again_template["sharedCounters"][0]["counters"]["memory"]["value"] == "80Gi"
    # Within one document the full GPU's counters are its own, not the counter set's.
    full = again_template["devices"][0]["consumesCounters"][0]["counters"]
    shared = again_template["sharedCounters"][0]["counters"]
    assert full == shared and full["memory"] is not shared["memory"]
