"""``python -m allocator catalog aws``: documents on standard output, exit 2 for bad input."""

from __future__ import annotations

import io
import json

import pytest
import yaml

from allocator.cli import main
from allocator.snapshot import load_files


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_prints_multi_document_yaml_that_loads_as_a_snapshot():
    code, out, err = cli("catalog", "aws", "--region", "us-west-2", "--families", "p5,g6e")
    assert code == 0, err
    assert out.startswith("# AWS EC2 accelerator catalog for us-west-2")
    docs = list(yaml.safe_load_all(out))
    assert {d["kind"] for d in docs} == {"InstanceType"}
    names = [d["metadata"]["name"] for d in docs]
    assert "p5.48xlarge" in names and "g6e.xlarge" in names and len(names) == 10
    assert "*id" not in out and "&id" not in out  # no YAML aliases
    loaded = load_files([("catalog.yaml", out)])
    assert len(loaded.instance_types) == 10


def test_json_is_one_list_and_device_classes_come_first():
    code, out, _ = cli("catalog", "aws", "--families", "trn1", "--json", "--device-classes")
    assert code == 0
    body = json.loads(out)
    assert body["kind"] == "List"
    kinds = [item["kind"] for item in body["items"]]
    assert kinds == ["DeviceClass", "InstanceType", "InstanceType"]
    assert body["items"][0]["metadata"]["name"] == "neuron.aws.com"


def test_no_mig_and_capacity_types_shape_the_documents():
    code, out, _ = cli(
        "catalog", "aws", "--families", "p4d", "--no-mig", "--capacity-types", "on-demand"
    )
    assert code == 0
    (doc,) = list(yaml.safe_load_all(out))
    (template,) = doc["spec"]["dynamicResources"]["resourceSliceTemplates"]
    assert [d["name"] for d in template["devices"]] == [f"gpu-{i}" for i in range(8)]
    assert {o["capacityType"] for o in doc["spec"]["offerings"]} == {"on-demand"}
    assert doc["spec"]["offerings"][0]["price"] == 21.957642


def test_list_names_regions_families_and_accelerators():
    code, out, _ = cli("catalog", "aws", "--list")
    assert code == 0
    assert "us-gov-west-1" in out.splitlines()[0]
    assert "p5.48xlarge" in out and "8 x NVIDIA H100 80GB HBM3 (MIG)" in out
    assert "16 x trainium2 (neuron.aws.com)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--region", "mars-1"], "catalog aws: unknown region 'mars-1'"),
        (["--families", "p5,z9"], "catalog aws: unknown family 'z9'"),
        (["--region", "us-gov-east-1", "--families", "trn2"], "not sold in us-gov-east-1"),
        (["--capacity-types", "reserved"], "unknown capacity type 'reserved'"),
    ],
)
def test_bad_region_or_family_exits_2_with_the_reason(args, message):
    code, out, err = cli("catalog", "aws", *args)
    assert code == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err


def test_unknown_cloud_is_a_usage_error():
    code, _, err = cli("catalog", "gcp")
    assert code == 2
    assert "invalid choice: 'gcp'" in err
