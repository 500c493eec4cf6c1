"""CONTRACT section 1: the cluster snapshot (encodings, kinds, versions, errors, claims)."""

from __future__ import annotations

import copy
import json

import pytest

from tests.contract.conftest import (
    claim,
    claim_template,
    cli,
    device_class,
    gpu_cluster,
    gpu_devices,
    namespace,
    node,
    pod,
    request,
    resource_slice,
    simulate,
    write_yaml,
)


def _placements(run) -> list[tuple]:
    return [
        (p["pod"], p["scheduled"], json.dumps(p["target"], sort_keys=True)) for p in run.doc["pods"]
    ]


def _small_cluster() -> list[dict]:
    return gpu_cluster(
        [
            pod(
                "trainer-0",
                cpu="4",
                claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            ),
            pod("web-0", cpu="1"),
        ],
        extra=[claim_template("one-gpu")],
    )


@pytest.fixture
def yaml_run(tmp_path):
    return simulate(tmp_path, _small_cluster())


@pytest.mark.parametrize(
    "shape",
    [
        "json-object-per-file",
        "json-array",
        "json-List",
        "json-PodList",
        "yaml-List",
        "several-files",
    ],
)
def test_every_encoding_gives_the_same_simulation(tmp_path, yaml_run, shape):
    docs = _small_cluster()
    paths = []
    if shape == "json-object-per-file":
        for i, doc in enumerate(docs):
            path = tmp_path / f"obj-{i}.json"
            path.write_text(json.dumps(doc))
            paths.append(path)
    elif shape == "json-array":
        paths.append(tmp_path / "all.json")
        paths[0].write_text(json.dumps(docs))
    elif shape in ("json-List", "json-PodList"):
        # kubectl get -o json prints kind: List, or kind: <Kind>List for one kind.
        pods = [d for d in docs if d["kind"] == "Pod"]
        rest = [d for d in docs if d["kind"] != "Pod"]
        kind = "List" if shape == "json-List" else "PodList"
        (tmp_path / "rest.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": rest, "metadata": {}})
        )
        (tmp_path / "pods.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": kind, "items": pods, "metadata": {}})
        )
        paths = [tmp_path / "rest.json", tmp_path / "pods.json"]
    elif shape == "yaml-List":
        paths.append(write_yaml(tmp_path, [{"apiVersion": "v1", "kind": "List", "items": docs}]))
    else:
        half = len(docs) // 2
        paths = [
            write_yaml(tmp_path, docs[:half], "a.yaml"),
            write_yaml(tmp_path, docs[half:], "b.yaml"),
        ]
    run = cli("simulate", *paths, "--json")
    assert run.status == 0, run.stderr
    assert _placements(run) == _placements(yaml_run)
    assert run.doc["stats"]["scheduled"] == 2


def test_validate_counts_every_recognised_kind_of_the_demo():
    from tests.contract.conftest import DEMO

    run = cli("validate", DEMO)
    assert run.status == 0, run.stderr
    for kind in [
        "ResourceSlice",
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "DeviceTaintRule",
        "Namespace",
        "Node",
        "Pod",
        "NodePool",
        "NodeClaim",
        "InstanceType",
    ]:
        assert kind in run.stdout, kind


def _beta_cluster(api: str, slice_doc: dict) -> list[dict]:
    return [
        namespace("default"),
        {**device_class(), "apiVersion": api},
        node("gpu-node-1", cpu="32", memory="256Gi"),
        slice_doc,
        pod("trainer-0", claims=[{"name": "gpu", "resourceClaimName": "h100"}]),
        {
            **claim(
                "h100",
                requests=[
                    request(
                        selectors=[
                            {
                                "cel": {
                                    "expression": 'device.attributes["gpu.nvidia.com"].model == "H100"'
                                }
                            }
                        ]
                    )
                ],
            ),
            "apiVersion": api,
        }
        if api != "resource.k8s.io/v1beta1"
        else {
            "apiVersion": api,
            "kind": "ResourceClaim",
            "metadata": {"name": "h100", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": 'device.attributes["gpu.nvidia.com"].model == "H100"'
                                    }
                                }
                            ],
                        }
                    ]
                }
            },
        },
    ]


def test_v1beta2_objects_are_read_as_is(tmp_path):
    slice_doc = resource_slice("gpu-node-1", gpu_devices(1), api="resource.k8s.io/v1beta2")
    run = simulate(tmp_path, _beta_cluster("resource.k8s.io/v1beta2", slice_doc))
    entry = run.pod("default/trainer-0")
    assert entry["scheduled"] is True, entry["error"]
    assert entry["claims"][0]["devices"][0]["device"] == "gpu-0"


def test_v1beta1_slice_is_unwrapped_from_basic(tmp_path):
    devices = [
        {
            "name": "gpu-0",
            "basic": {
                "attributes": {"model": {"string": "H100"}},
                "capacity": {"memory": {"value": "80Gi"}},
            },
        }
    ]
    slice_doc = resource_slice("gpu-node-1", devices, api="resource.k8s.io/v1beta1")
    run = simulate(tmp_path, _beta_cluster("resource.k8s.io/v1beta1", slice_doc))
    entry = run.pod("default/trainer-0")
    # The selector reads an attribute that only exists inside basic: it was unwrapped.
    assert entry["scheduled"] is True, entry["error"]
    assert entry["claims"][0]["devices"][0]["device"] == "gpu-0"


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1alpha3"])
def test_device_taint_rule_versions(tmp_path, version):
    rule = {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"drain-{version}"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gpu-node-1"},
            "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"},
        },
    }
    run = simulate(
        tmp_path,
        gpu_cluster(
            [pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])],
            extra=[claim_template("one-gpu"), rule],
        ),
    )
    rules = run.doc["deviceTaintRules"]
    assert [r["name"] for r in rules] == [f"drain-{version}"]
    assert rules[0]["publishedDevices"] == 2
    # The taint keeps the pod off the node's GPUs: it gets a new NodeClaim instead.
    assert run.pod("default/p")["target"]["kind"] == "NodeClaim"


def test_unknown_kinds_are_warned_and_skipped(tmp_path):
    docs = _small_cluster() + [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
        },
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiFamily": "AL2023"},
        },
    ]
    path = write_yaml(tmp_path, docs)
    val = cli("validate", path)
    assert val.status == 0, val.stderr
    assert "Deployment" in val.stdout + val.stderr
    assert "EC2NodeClass" in val.stdout + val.stderr
    run = cli("simulate", path, "--json")
    assert run.status == 0, run.stderr
    assert run.doc["stats"]["scheduled"] == 2


def test_unknown_fields_are_kept_not_rejected(tmp_path, yaml_run):
    docs = _small_cluster()
    for doc in docs:
        doc.setdefault("spec", {})["futureField"] = {"introducedIn": "1.40"}
        doc["status"] = {**doc.get("status", {}), "futureStatus": True}
        if doc["kind"] == "ResourceSlice":
            doc["spec"]["devices"][0]["futureDeviceField"] = ["x"]
    run = simulate(tmp_path, docs)
    assert _placements(run) == _placements(yaml_run)


def test_both_node_allocatable_shapes_are_read(feature_results):
    doc = feature_results["node-allocatable"]
    pods = {p["pod"]: p for p in doc["pods"]}
    # my-node's xpu uses the docs' nodeAllocatableResources shape (8Gi per pod overhead),
    # worker-2's the 1.36 nodeAllocatableResourceMappings shape.
    x = pods["default/inference-x"]
    assert x["scheduled"] and x["target"]["name"] == "worker-2", x
    assert x["draNodeResources"]["memory"] == "8Gi"
    cpu = pods["default/cpu-pinned"]
    assert cpu["scheduled"] and cpu["draNodeResources"]["cpu"] == "8"


def _skip_ops_cluster(declared: list[str] | None) -> list[dict]:
    status = {} if declared is None else {"declaredFeatures": declared}
    slice_doc = resource_slice(
        "gpu-node-1",
        gpu_devices(1),
        skipNodeOperations=["NodePrepareResources", "NodeUnprepareResources"],
    )
    return [
        namespace("default"),
        device_class(),
        node("gpu-node-1", cpu="32", memory="256Gi", **status),
        slice_doc,
        claim_template("one-gpu"),
        pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
    ]


def test_node_declared_features_are_honoured(tmp_path):
    declared = simulate(tmp_path, _skip_ops_cluster(["DRAOptionalNodeOperations"]))
    entry = declared.pod("default/p")
    assert entry["scheduled"] and entry["target"]["name"] == "gpu-node-1", entry
    assert entry["claims"][0]["devices"][0]["skipNodeOperations"] == [
        "NodePrepareResources",
        "NodeUnprepareResources",
    ]
    undeclared = simulate(tmp_path, _skip_ops_cluster([]))
    assert undeclared.pod("default/p")["scheduled"] is False
    assert "declaredFeatures" in undeclared.pod("default/p")["error"]


def test_error_names_file_doc_object_and_field_exactly(tmp_path, monkeypatch):
    docs = [
        namespace("default"),
        device_class(),
        node("gpu-node-1"),
        resource_slice("gpu-node-1", gpu_devices(1)),
        namespace("ml"),
        namespace("web"),
        claim("gpu", requests=[request(allocationMode="ExactCount", count=0)]),
    ]
    write_yaml(tmp_path, docs, "snapshot.yaml")
    monkeypatch.chdir(tmp_path)
    for command in ("validate", "simulate"):
        run = cli(command, "snapshot.yaml")
        assert run.status == 2
        assert (
            "snapshot.yaml doc 7 ResourceClaim default/gpu: "
            "spec.devices.requests[0].exactly.count: must be an integer >= 1"
        ) in run.stderr.splitlines()
        assert run.stdout == "" or "Traceback" not in run.stdout


def test_instance_type_shape_with_dynamic_resources(tmp_path):
    from tests.contract.conftest import instance_type, nodepool, template_slice

    it = instance_type(
        "p5.48xlarge",
        cpu="192",
        memory="2048Gi",
        slices=[
            template_slice("p5-gpus", gpu_devices(1)),
            template_slice("p5-nics", [{"name": "nic-0"}], driver="nic.example.com"),
        ],
        attribute_bindings=[
            {
                "attribute": "resource.kubernetes.io/pcieRoot",
                "devices": [
                    {"driver": "gpu.nvidia.com", "pool": "p5-gpus", "device": "gpu-0"},
                    {"driver": "nic.example.com", "pool": "p5-nics", "device": "nic-0"},
                ],
            }
        ],
    )
    pair = claim_template("pair", requests=[request("gpu"), request("nic", "nic.example.com")])
    pair["spec"]["spec"]["devices"]["constraints"] = [
        {"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}
    ]
    run = simulate(
        tmp_path,
        [
            namespace("default"),
            device_class(),
            device_class("nic.example.com"),
            nodepool("gpu"),
            it,
            pair,
            pod("p", claims=[{"name": "pair", "resourceClaimTemplateName": "pair"}]),
        ],
    )
    entry = run.pod("default/p")
    assert entry["scheduled"], entry["error"]
    assert {d["device"] for d in entry["claims"][0]["devices"]} == {"gpu-0", "nic-0"}
    assert {d["instanceType"] for d in entry["claims"][0]["devices"]} == {"p5.48xlarge"}
    assert run.doc["nodeClaims"][0]["instanceTypes"] == ["p5.48xlarge"]


def test_kwok_instance_types_json_is_accepted(tmp_path):
    from tests.contract.conftest import nodepool

    kwok = [
        {
            "name": "c-8x-amd64-linux",
            "offerings": [
                {
                    "Price": 0.34,
                    "Available": True,
                    "Requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": ["us-west-2a"],
                        },
                    ],
                },
            ],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {"cpu": "8", "memory": "16Gi", "pods": "110"},
        },
        {
            "name": "c-2x-amd64-linux",
            "offerings": [
                {
                    "Price": 0.09,
                    "Available": True,
                    "Requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": ["us-west-2a"],
                        },
                    ],
                },
            ],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        },
    ]
    (tmp_path / "instance_types.json").write_text(json.dumps(kwok))
    path = write_yaml(
        tmp_path, [namespace("default"), nodepool("default"), pod("big", cpu="6", memory="8Gi")]
    )
    run = cli("simulate", path, tmp_path / "instance_types.json", "--json")
    assert run.status == 0, run.stderr
    entry = run.pod("default/big")
    assert entry["scheduled"] and entry["target"]["new"], entry["error"]
    assert run.doc["nodeClaims"][0]["instanceTypes"] == ["c-8x-amd64-linux"]


def test_template_claims_are_named_pod_dash_entry(tmp_path):
    run = simulate(tmp_path, _small_cluster())
    claims = run.pod("default/trainer-0")["claims"]
    assert [c["claim"] for c in claims] == ["default/trainer-0-gpu"]
    again = simulate(tmp_path, _small_cluster())
    assert again.pod("default/trainer-0")["claims"][0]["claim"] == "default/trainer-0-gpu"


def test_template_claim_name_comes_from_resource_claim_statuses(tmp_path):
    generated = claim("trainer-0-gpu-x7k2p")
    generated["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    p = pod(
        "trainer-0",
        claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        claim_statuses=[{"name": "gpu", "resourceClaimName": "trainer-0-gpu-x7k2p"}],
    )
    run = simulate(tmp_path, gpu_cluster([p], extra=[claim_template("one-gpu"), generated]))
    assert [c["claim"] for c in run.pod("default/trainer-0")["claims"]] == [
        "default/trainer-0-gpu-x7k2p"
    ]


def test_null_resource_claim_name_means_no_claim(tmp_path):
    p = pod(
        "trainer-0",
        claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        claim_statuses=[{"name": "gpu", "resourceClaimName": None}],
    )
    run = simulate(tmp_path, gpu_cluster([p], extra=[claim_template("one-gpu")]))
    entry = run.pod("default/trainer-0")
    assert entry["claims"] == []
    assert entry["scheduled"] and entry["target"] == {
        "kind": "Node",
        "name": "gpu-node-1",
        "new": False,
    }


def test_malformed_known_kind_makes_snapshot_unusable_not_partial(tmp_path):
    docs = _small_cluster()
    bad = copy.deepcopy(docs[3])  # the ResourceSlice
    bad["metadata"]["name"] = "broken-slice"
    bad["spec"]["devices"] = "gpu-0"
    path = write_yaml(tmp_path, docs + [bad])
    run = cli("simulate", path, "--json")
    assert run.status == 2 and run.stdout == ""
    assert "ResourceSlice broken-slice: spec.devices" in run.stderr


def test_validate_prints_each_problem(tmp_path, monkeypatch):
    docs = [
        namespace("default"),
        node("n1", cpu="many"),
        claim("gpu", requests=[request(allocationMode="ExactCount", count=0)]),
    ]
    write_yaml(tmp_path, docs, "snapshot.yaml")
    monkeypatch.chdir(tmp_path)
    run = cli("validate", "snapshot.yaml")
    assert run.status == 2
    lines = run.stderr.splitlines()
    assert any(
        line.startswith("snapshot.yaml doc 2 Node n1: status.allocatable.cpu: ") for line in lines
    ), lines
    assert any(
        line.startswith("snapshot.yaml doc 3 ResourceClaim default/gpu: ") for line in lines
    ), lines


@pytest.mark.parametrize("wrap", ["array", "List"])
def test_json_doc_index_counts_items(tmp_path, monkeypatch, wrap):
    items = [namespace("default"), node("n1"), node("n2", cpu="many")]
    body = items if wrap == "array" else {"apiVersion": "v1", "kind": "List", "items": items}
    (tmp_path / "cluster.json").write_text(json.dumps(body))
    monkeypatch.chdir(tmp_path)
    run = cli("validate", "cluster.json")
    assert run.status == 2
    assert "cluster.json doc 3 Node n2: status.allocatable.cpu: " in run.stderr, run.stderr


def test_v1beta1_template_and_class_shapes(tmp_path):
    api = "resource.k8s.io/v1beta1"
    docs = [
        namespace("default"),
        {**device_class(), "apiVersion": api},
        node("gpu-node-1", cpu="32", memory="256Gi"),
        resource_slice(
            "gpu-node-1",
            [
                {"name": "gpu-0", "basic": {"attributes": {"model": {"string": "L4"}}}},
                {"name": "gpu-1", "basic": {"attributes": {"model": {"string": "H100"}}}},
            ],
            api=api,
        ),
        {
            "apiVersion": api,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "h100", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "deviceClassName": "gpu.nvidia.com",
                                "allocationMode": "ExactCount",
                                "count": 1,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": 'device.attributes["gpu.nvidia.com"].model == "H100"'
                                        }
                                    }
                                ],
                            }
                        ]
                    }
                }
            },
        },
        pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "h100"}]),
    ]
    run = simulate(tmp_path, docs)
    entry = run.pod("default/p")
    assert entry["scheduled"], entry["error"]
    assert entry["claims"][0]["devices"][0]["device"] == "gpu-1"


def test_v1beta1_device_taints_inside_basic(tmp_path):
    api = "resource.k8s.io/v1beta1"
    devices = [
        {
            "name": "gpu-0",
            "basic": {
                "attributes": {"model": {"string": "H100"}},
                "taints": [{"key": "example.com/ecc", "value": "bad", "effect": "NoSchedule"}],
            },
        },
        {"name": "gpu-1", "basic": {"attributes": {"model": {"string": "H100"}}}},
    ]
    docs = [
        namespace("default"),
        device_class(),
        node("gpu-node-1", cpu="32", memory="256Gi"),
        resource_slice("gpu-node-1", devices, api=api),
        claim_template("one"),
        pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "one"}]),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["claims"][0]["devices"][0]["device"] == "gpu-1"


def test_pools_count_the_newest_generation(tmp_path):
    old = resource_slice("gpu-node-1", gpu_devices(4), name="gpu-node-1-old")
    new = resource_slice("gpu-node-1", gpu_devices(2), name="gpu-node-1-new")
    new["spec"]["pool"]["generation"] = 2
    docs = [
        namespace("default"),
        device_class(),
        node("gpu-node-1", cpu="32", memory="256Gi"),
        old,
        new,
    ]
    run = simulate(tmp_path, docs)
    (pool,) = run.doc["pools"]
    assert (pool["generation"], pool["totalDevices"], pool["resourceSliceCount"]) == (2, 2, 1)


def test_device_taint_rules_are_computed_on_the_snapshot_as_uploaded(tmp_path):
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "soft"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gpu-node-1"},
            "taint": {"key": "example.com/aging", "value": "true", "effect": "None"},
        },
    }
    docs = gpu_cluster(
        [pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "one"}])],
        extra=[claim_template("one"), rule],
    )
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["target"]["name"] == "gpu-node-1"  # effect None: no effect
    (entry,) = run.doc["deviceTaintRules"]
    assert (entry["publishedDevices"], entry["allocatedDevices"], entry["podsToEvict"]) == (2, 0, 0)


def test_generated_claims_exist_for_every_pod_before_scheduling(tmp_path):
    # The resourceclaim controller creates b's claim "b-gpu" when b is created, whatever the
    # scheduling order: a pod naming it directly shares it.
    docs = gpu_cluster(
        [
            pod("a", cpu="4", claims=[{"name": "g", "resourceClaimName": "b-gpu"}]),
            pod("b", cpu="1", claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ],
        extra=[claim_template("one-gpu")],
    )
    run = simulate(tmp_path, docs)
    a, b = run.pod("default/a"), run.pod("default/b")
    assert a["scheduled"], a["error"]
    assert [c["claim"] for c in a["claims"]] == ["default/b-gpu"]
    assert b["claims"][0]["state"] == "allocated-in-memory"
    assert a["target"] == b["target"]
