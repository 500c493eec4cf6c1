"""The catalog through the snapshot loader and a whole simulation: what Karpenter would launch
for GPU and Neuron pods when the cloud's instance types come from the catalog."""

from __future__ import annotations

from allocator.catalog import aws
from tests.scheduling.k8s import (
    device_class,
    families,
    node_pool,
    pod,
    pod_result,
    request,
    run,
    template,
)

H100 = "NVIDIA H100 80GB HBM3"
H100_CLASS = device_class(
    "h100",
    "device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
    f"device.attributes['gpu.nvidia.com'].productName == '{H100}'",
)


def catalog(region: str = "us-west-2", *names: str, mig: bool = True) -> list[dict]:
    options = aws.CatalogOptions(mig=mig)
    docs = aws.instance_types(region, names or None, options)
    return aws.device_classes() + docs


def gpu_pool(*family_names: str) -> dict:
    return node_pool("gpu", requirements=families(*family_names) if family_names else [])


def launched(result: dict, key: str) -> dict:
    entry = pod_result(result, key)
    assert entry["scheduled"], entry.get("error")
    name = entry["target"]["name"]
    return next(nc for nc in result["nodeClaims"] if nc["name"] == name)


def test_eight_h100s_by_product_name_get_a_p5_48xlarge():
    docs = [
        *catalog("us-west-2"),
        H100_CLASS,
        gpu_pool(),
        template("eight-h100", [request("gpus", "h100", count=8)]),
        pod("train-0", cpu="8", memory="64Gi", templates={"gpus": "eight-h100"}),
    ]
    result = run(docs)
    nc = launched(result, "default/train-0")
    assert nc["instanceTypes"] == ["p5.48xlarge"]
    assert nc["price"] == 55.04
    devices = pod_result(result, "default/train-0")["claims"][0]["devices"]
    assert [d["device"] for d in devices] == [f"gpu-{i}" for i in range(8)]
    assert {d["pool"] for d in devices} == {"p5.48xlarge"}
    # The single-GPU size was tried and refused for its devices, by the selector's words.
    pruned = {p["name"]: p["message"] for p in nc["instanceTypesPruned"]}
    assert "1 of 8 devices available" in pruned["p5.4xlarge"]


def test_one_h100_goes_to_the_cheapest_type_that_has_one():
    docs = [
        *catalog("us-east-1", "p5", "p4d", "g6e"),
        H100_CLASS,
        gpu_pool(),
        template("one-h100", [request("gpu", "h100")]),
        pod("infer-0", templates={"gpu": "one-h100"}),
    ]
    nc = launched(run(docs), "default/infer-0")
    assert nc["instanceTypes"] == ["p5.48xlarge", "p5.4xlarge"]
    assert nc["price"] == 6.88


def test_a_mig_1g10gb_request_gets_a_partition_of_an_h100():
    docs = [
        *catalog("us-west-2", "p5"),
        gpu_pool("p5"),
        template(
            "slice",
            [
                request(
                    "mig",
                    "mig.nvidia.com",
                    selectors=["device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"],
                )
            ],
        ),
        pod("notebook-0", templates={"mig": "slice"}),
    ]
    result = run(docs)
    nc = launched(result, "default/notebook-0")
    assert nc["instanceTypes"] == ["p5.48xlarge", "p5.4xlarge"]
    devices = pod_result(result, "default/notebook-0")["claims"][0]["devices"]
    assert {d["device"] for d in devices} == {"gpu-0-mig-1g10gb-19-0"}


def test_seven_slices_share_one_gpu_and_an_eighth_needs_another():
    selector = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    docs = [
        *catalog("us-east-1", "p5"),
        gpu_pool("p5"),
        template("seven", [request("mig", "mig.nvidia.com", count=7, selectors=[selector])]),
        template("eight", [request("mig", "mig.nvidia.com", count=8, selectors=[selector])]),
        pod("seven-0", templates={"mig": "seven"}),
    ]
    result = run(docs)
    assert launched(result, "default/seven-0")["price"] == 6.88  # one H100: p5.4xlarge
    devices = pod_result(result, "default/seven-0")["claims"][0]["devices"]
    assert {d["device"] for d in devices if d["instanceType"] == "p5.4xlarge"} == {
        f"gpu-0-mig-1g10gb-19-{i}" for i in range(7)
    }
    docs[-1] = pod("eight-0", templates={"mig": "eight"})
    result = run(docs)
    assert launched(result, "default/eight-0")["instanceTypes"] == ["p5.48xlarge"]


def test_a_whole_gpu_and_its_partitions_exclude_each_other():
    docs = [
        *catalog("us-east-1", "p5"),
        gpu_pool("p5"),
        template(
            "all-and-a-slice",
            [
                request("gpus", "gpu.nvidia.com", count=8),
                request("mig", "mig.nvidia.com"),
            ],
        ),
        pod("greedy-0", templates={"gpus": "all-and-a-slice"}),
    ]
    entry = pod_result(run(docs), "default/greedy-0")
    assert not entry["scheduled"]
    reasons = [r for f in entry["explanation"] for r in f["rejections"]]
    assert any(r["reason"] == "counter" for r in reasons), entry["explanation"]


def test_eight_gpus_never_land_on_a_g6e_xlarge():
    docs = [
        *catalog("us-west-2", "g6e"),
        gpu_pool("g6e"),
        template("eight", [request("gpus", "gpu.nvidia.com", count=8)]),
        pod("train-0", templates={"gpus": "eight"}),
    ]
    nc = launched(run(docs), "default/train-0")
    assert nc["instanceTypes"] == ["g6e.48xlarge"]


def test_a_nodepool_limited_to_small_types_explains_that_none_has_eight_gpus():
    docs = [
        *catalog("us-west-2", "g6e"),
        node_pool(
            "small",
            requirements=[
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["g6e.xlarge", "g6e.2xlarge"],
                }
            ],
        ),
        template("eight", [request("gpus", "gpu.nvidia.com", count=8)]),
        pod("train-0", templates={"gpus": "eight"}),
    ]
    entry = pod_result(run(docs), "default/train-0")
    assert not entry["scheduled"]
    assert "no instance type can satisfy the allocation" in entry["error"]
    # Both sizes have one L40S: refused in the same words, they share one clause.
    clause = "g6e.xlarge, g6e.2xlarge: claim default/train-0-gpus request gpus: 1 of 8 devices"
    assert clause in entry["error"]
    fixes = {s["kind"]: s for s in entry["suggestions"]}
    assert fixes["nodepool-requirement"]["change"]["object"] == "NodePool small"


def test_extended_resource_gpu_is_served_by_the_drivers_device_class():
    docs = [
        *catalog("us-east-1", "g4dn", "g5"),
        gpu_pool("g4dn", "g5"),
        pod("legacy-0"),
    ]
    legacy = docs[-1]
    legacy["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    result = run(docs)
    nc = launched(result, "default/legacy-0")
    assert nc["price"] == 0.526  # g4dn.xlarge, the cheapest single T4
    claim = pod_result(result, "default/legacy-0")["claims"][0]
    assert claim["claim"] == "default/legacy-0-extended-resources"
    assert {d["driver"] for d in claim["devices"]} == {"gpu.nvidia.com"}


def test_four_connected_neuron_devices_share_a_device_group():
    docs = [
        *catalog("us-east-1", "trn1"),
        node_pool("neuron", requirements=families("trn1")),
        template(
            "four-connected",
            [request("neurons", "neuron.aws.com", count=4)],
            match="resource.aws.com/devicegroup4_id",
        ),
        pod("train-0", templates={"neurons": "four-connected"}),
    ]
    result = run(docs)
    nc = launched(result, "default/train-0")
    assert nc["instanceTypes"] == ["trn1.32xlarge"]
    devices = pod_result(result, "default/train-0")["claims"][0]["devices"]
    assert [d["device"] for d in devices] == [f"neurondevice{i}" for i in range(4)]


def test_trn2_without_a_price_has_no_offering_to_launch():
    docs = [
        *catalog("us-east-1", "trn2"),
        node_pool("neuron", requirements=families("trn2")),
        template("one", [request("neurons", "neuron.aws.com")]),
        pod("train-0", templates={"neurons": "one"}),
    ]
    entry = pod_result(run(docs), "default/train-0")
    assert not entry["scheduled"]
    assert "offering" in entry["error"]
