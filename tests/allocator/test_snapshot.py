import copy
import json
import time
from pathlib import Path

import pytest
import yaml

from allocator.model import DeviceID, Version
from allocator.quantity import Quantity
from allocator.snapshot import SnapshotError, load_files, load_paths

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
GPU_CLUSTER = FIXTURES / "gpu-cluster.yaml"


def Q(s):
    return Quantity.parse(s)


def cluster_docs():
    return [d for d in yaml.safe_load_all(GPU_CLUSTER.read_text()) if d]


def known_docs():
    return [d for d in cluster_docs() if d["kind"] != "Deployment"]


def problems_of(files):
    with pytest.raises(SnapshotError) as err:
        load_files(files)
    return err.value.problems


def one_problem(doc, name="bad.yaml"):
    problems = problems_of([(name, yaml.safe_dump(doc))])
    assert len(problems) == 1, problems
    return problems[0]


@pytest.fixture(scope="module")
def snap():
    return load_paths([str(GPU_CLUSTER)])


# --- encodings -----------------------------------------------------------------------------


def test_multi_document_yaml(snap):
    assert snap.object_counts() == {
        "Namespace": 1,
        "DeviceClass": 1,
        "ResourceSlice": 2,
        "ResourceClaimTemplate": 1,
        "ResourceClaim": 1,
        "DeviceTaintRule": 1,
        "Node": 1,
        "Pod": 1,
        "NodePool": 1,
        "NodeClaim": 1,
        "InstanceType": 1,
    }
    # Unknown kinds are a warning naming the document, never an error.
    assert snap.warnings == [
        f"{GPU_CLUSTER} doc 13 Deployment ml/dashboard: unknown kind Deployment (apps/v1), skipped"
    ]
    kinds = [k for k, _ in snap.documents]
    assert kinds[0] == "Namespace" and kinds[-1] == "InstanceType"


def test_json_object_array_and_list_encodings(snap):
    docs = known_docs()
    as_list = {"apiVersion": "v1", "kind": "List", "items": docs, "metadata": {}}
    for content in (
        json.dumps(docs),
        json.dumps(as_list),
        json.dumps({"apiVersion": "v1", "kind": "PodList", "items": docs}),
        yaml.safe_dump(as_list),
    ):
        loaded = load_files([("cluster.json", content)])
        assert loaded.object_counts() == snap.object_counts()
        assert loaded.warnings == []
    single = load_files([("node.json", json.dumps(docs[7]).encode())])
    assert list(single.nodes) == ["ip-10-0-1-7"]


def test_several_files_and_bytes():
    docs = known_docs()
    half = len(docs) // 2
    snapshot = load_files(
        [
            ("a.yaml", yaml.safe_dump_all(docs[:half]).encode()),
            ("b.json", json.dumps(docs[half:])),
        ]
    )
    assert len(snapshot.documents) == len(docs)


def test_load_paths_directory(tmp_path):
    (tmp_path / "cluster.yaml").write_text(GPU_CLUSTER.read_text())
    (tmp_path / "catalog.json").write_text((FIXTURES / "kwok_instance_types.json").read_text())
    (tmp_path / "README.txt").write_text("not a snapshot")
    snapshot = load_paths([str(tmp_path)])
    assert set(snapshot.instance_types) == {"p5.48xlarge", "c-4x-amd64-linux", "c-1x-arm64-linux"}
    with pytest.raises(SnapshotError, match="cannot read"):
        load_paths([str(tmp_path / "missing.yaml")])


# --- kinds ---------------------------------------------------------------------------------


def test_resource_slice(snap):
    node_slice, zonal = snap.resource_slices
    assert (node_slice.driver, node_slice.pool, node_slice.generation) == (
        "gpu.nvidia.com",
        "ip-10-0-1-7",
        3,
    )
    assert node_slice.node_name == "ip-10-0-1-7" and node_slice.owner_node == "ip-10-0-1-7"
    assert node_slice.resource_slice_count == 1
    assert node_slice.shared_counters[0].name == "gpu-0-counters"
    assert node_slice.shared_counters[0].counters == {
        "memory": Q("80Gi"),
        "multiprocessors": Q(132),
    }
    gpu, mig = node_slice.devices
    assert gpu.attributes == {
        "model": "H100",
        "index": 0,
        "mig-capable": True,
        "driverVersion": Version("550.54.15"),
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
        "supportedModes": ("mig", "vgpu"),
        "nvlinkPeers": (1, 2, 3),
    }
    assert (
        gpu.capacity["memory"].value == Q("80Gi") and gpu.capacity["memory"].request_policy is None
    )
    bw = gpu.capacity["bandwidth"].request_policy
    assert (bw.default, bw.valid_range_min, bw.valid_range_max, bw.valid_range_step) == (
        Q("1G"),
        Q("1G"),
        Q("10G"),
        Q("1G"),
    )
    assert gpu.capacity["slots"].request_policy.valid_values == (Q(1), Q(2), Q(4), Q(8))
    assert gpu.allow_multiple_allocations
    assert gpu.raw["nodeAllocatableResources"] == {"memory": "2Gi"}  # kept for the allocator
    assert gpu.taints[0].key == "gpu.nvidia.com/ecc-errors"
    assert gpu.taints[0].effect == "NoSchedule"
    assert gpu.taints[0].time_added == "2026-11-30T09:00:00Z"
    (consumption,) = mig.consumes_counters
    assert consumption.counter_set == "gpu-0-counters"
    assert consumption.counters == {"memory": Q("10Gi"), "multiprocessors": Q(16)}
    assert consumption.compatibility_groups == ("mig",)
    assert mig.binding_conditions == ("gpu.nvidia.com/fabric-attached",)
    assert mig.binding_failure_conditions == ("gpu.nvidia.com/fabric-failed",)
    assert mig.binds_to_node and not mig.allow_multiple_allocations
    assert zonal.node_name is None and zonal.owner_node is None
    assert zonal.node_selector["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "us-west-2a"
    ]


def test_device_class_and_claims(snap):
    assert snap.device_classes["gpu.nvidia.com"].selectors[0].cel == (
        'device.driver == "gpu.nvidia.com"'
    )
    template = snap.resource_claim_templates["ml/one-gpu"]
    gpu, nic = template.spec.requests
    assert gpu.exactly.device_class_name == "gpu.nvidia.com"
    assert gpu.exactly.count == 1 and gpu.exactly.allocation_mode == "ExactCount"
    assert gpu.exactly.tolerations[0].operator == "Exists"
    assert gpu.exactly.capacity.requests == {"memory": Q("40Gi")}
    assert nic.exactly is None
    assert [(s.name, s.request.count, s.request.allocation_mode) for s in nic.first_available] == [
        ("fast", 2, "ExactCount"),
        ("any", 1, "All"),
    ]
    assert template.spec.constraints[0].match_attribute == "resource.kubernetes.io/pcieRoot"
    assert template.spec.constraints[0].requests == ["gpu", "nic"]

    claim = snap.resource_claims["ml/shared-gpu"]
    assert claim.spec.requests[0].exactly.admin_access
    (result,) = claim.allocation.devices
    assert result.device_id == DeviceID("gpu.nvidia.com", "ip-10-0-1-7", "gpu-0")
    assert result.admin_access and result.share_id.startswith("9f3c1a52")
    assert result.consumed_capacity == {"memory": Q("40Gi")}
    terms = claim.allocation.node_selector["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == ["ip-10-0-1-7"]
    assert [(r.resource, r.name) for r in claim.reserved_for] == [("pods", "notebook-0")]


def test_device_taint_rule(snap):
    (rule,) = snap.device_taint_rules
    assert (rule.driver, rule.pool, rule.device) == ("gpu.nvidia.com", "ip-10-0-1-7", "gpu-0")
    assert rule.taint.effect == "NoExecute" and rule.taint.value == "planned"


def test_namespace_and_node(snap):
    assert snap.namespaces["ml"].labels == {"resource.kubernetes.io/admin-access": "true"}
    node = snap.nodes["ip-10-0-1-7"]
    assert node.labels["karpenter.sh/initialized"] == "true"
    assert node.allocatable == {"cpu": Q("191450m"), "memory": Q("1980Gi"), "pods": Q(110)}
    assert [(t.key, t.effect) for t in node.taints] == [("nvidia.com/gpu", "NoSchedule")]
    assert node.declared_features == ("DRAOptionalNodeOperations",)
    assert not node.deleting


def test_pod(snap):
    (pod,) = snap.pods
    assert pod.key == "ml/train-0" and pod.uid.startswith("7d2f8a0e")
    # Containers 2.1 CPU + sidecar 500m = 2.6 < init peak 4; memory 16Gi+128Mi+512Mi wins;
    # overhead adds 250m; the GPU limit defaults the request.
    assert pod.requests == {
        "cpu": Q("4250m"),
        "memory": Q("17024Mi"),
        "nvidia.com/gpu": Q(1),
    }
    assert pod.container_count == 2
    assert pod.node_selector == {"karpenter.sh/capacity-type": "on-demand"}
    assert pod.required_node_affinity["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "us-west-2a",
        "us-west-2b",
    ]
    assert pod.tolerations[0].key == "nvidia.com/gpu"
    assert [(c.name, c.resource_claim_template_name) for c in pod.resource_claims] == [
        ("gpu", "one-gpu"),
        ("scratch", "one-gpu"),
    ]
    assert pod.resource_claim_statuses == {"gpu": "train-0-gpu-8x2kq", "scratch": None}
    assert pod.owner_kinds == ("Job",) and pod.phase == "Pending"
    assert pod.creation_timestamp == "2026-12-01T10:00:00Z"
    assert pod.node_name is None and not pod.deleting


def test_pod_requests_sidecar_peak():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "deletionTimestamp": "2026-12-01T10:00:00Z"},
        "spec": {
            "nodeName": "ip-10-0-1-7",
            "initContainers": [
                {
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "1"}},
                },
                {"name": "migrate", "resources": {"requests": {"cpu": "2"}}},
            ],
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}],
        },
    }
    (loaded,) = load_files([("pod.yaml", yaml.safe_dump(pod))]).pods
    # migrate runs next to the already-started proxy sidecar: 2 + 1 = 3 > 1 + 500m.
    assert loaded.requests == {"cpu": Q(3)}
    assert loaded.namespace == "default" and loaded.deleting and loaded.node_name == "ip-10-0-1-7"


def test_node_pool_and_node_claim(snap):
    pool = snap.node_pools["gpu"]
    assert pool.weight == 10 and pool.labels == {"team": "ml"}
    assert pool.requirements[0]["minValues"] == 1
    assert [t.key for t in pool.taints] == ["nvidia.com/gpu"]
    assert [t.key for t in pool.startup_taints] == ["gpu.nvidia.com/driver-not-ready"]
    assert pool.limits["nvidia.com/gpu"] == Q(64)
    claim = snap.node_claims["gpu-x8k2m"]
    assert claim.node_pool == "gpu" and claim.instance_type == "p5.48xlarge"
    assert claim.node_name is None and not claim.initialized
    assert claim.annotations == {"karpenter.sh/requested-dra-drivers": "gpu.nvidia.com"}


def test_instance_type(snap):
    it = snap.instance_types["p5.48xlarge"]
    assert it.capacity["cpu"] == Q("191450m")
    assert [(o.zone, o.capacity_type, o.price, o.available) for o in it.offerings] == [
        ("us-west-2a", "on-demand", 98.32, True),
        ("us-west-2b", "spot", 40.11, False),
    ]
    gpus, nics = it.resource_slice_templates
    assert (gpus.driver, gpus.pool, [d.name for d in gpus.devices]) == (
        "gpu.nvidia.com",
        "p5-gpus",
        ["gpu-0", "gpu-1"],
    )
    assert gpus.devices[1].attributes["resource.kubernetes.io/pcieRoot"] == "pci0000:10"
    assert nics.devices[0].attributes == {"speed": 400}
    (binding,) = it.attribute_bindings
    assert binding.devices == [
        DeviceID("gpu.nvidia.com", "p5-gpus", "gpu-0"),
        DeviceID("nic.example.com", "p5-nics", "nic-0"),
    ]


def test_kwok_instance_types():
    snapshot = load_paths([str(FIXTURES / "kwok_instance_types.json")])
    c4 = snapshot.instance_types["c-4x-amd64-linux"]
    assert c4.capacity == {
        "cpu": Q(4),
        "ephemeral-storage": Q("20Gi"),
        "memory": Q("16Gi"),
        "pods": Q(110),
    }
    assert c4.requirements == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]
    spot, od = c4.offerings
    assert (spot.zone, spot.capacity_type, spot.price, spot.available) == (
        "test-zone-a",
        "spot",
        0.1088,
        True,
    )
    assert (od.zone, od.capacity_type, od.available) == ("test-zone-b", "on-demand", False)
    assert od.requirements == [
        {"key": "karpenter.kwok.sh/partition", "operator": "In", "values": ["p1"]}
    ]
    # The older KWOK shape with CapacityType/Zone fields.
    arm = snapshot.instance_types["c-1x-arm64-linux"]
    assert [(o.zone, o.capacity_type) for o in arm.offerings] == [("test-zone-a", "spot")]
    assert snapshot.documents[0][0] == "InstanceType"
    assert snapshot.documents[0][1]["apiVersion"] == "dra-web.io/v1alpha1"


def test_v1beta1_conversion():
    snapshot = load_paths([str(FIXTURES / "v1beta1.yaml")])
    (rs,) = snapshot.resource_slices
    gpu0 = rs.devices[0]
    assert gpu0.attributes == {"model": "A100", "index": 0}
    assert gpu0.capacity["memory"].value == Q("40Gi")
    assert gpu0.taints[0].effect == "NoExecute"
    claim = snapshot.resource_claims["default/two-gpus"]
    gpus, nic = claim.spec.requests
    assert gpus.exactly.count == 2 and gpus.exactly.device_class_name == "gpu.example.com"
    assert "compareTo" in gpus.exactly.selectors[0].cel
    assert nic.exactly is None
    assert [s.name for s in nic.first_available] == ["fast", "slow"]
    assert nic.first_available[1].request.allocation_mode == "All"
    (rule,) = snapshot.device_taint_rules
    assert rule.device_class_name == "gpu.example.com"


def test_v1beta1_request_error_path():
    doc = yaml.safe_load((FIXTURES / "v1beta1.yaml").read_text().split("---")[1])
    doc["spec"]["devices"]["requests"][0]["count"] = 0
    assert one_problem(doc, "old.yaml") == (
        "old.yaml doc 1 ResourceClaim default/two-gpus: spec.devices.requests[0].count: "
        "must be an integer >= 1"
    )


# --- problems --------------------------------------------------------------------------------


def test_contract_example_problem():
    docs = known_docs()
    template = copy.deepcopy(docs[4])
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": copy.deepcopy(template["spec"]["spec"]),
    }
    claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    problems = problems_of([("snapshot.yaml", yaml.safe_dump_all([*docs[:6], claim]))])
    assert problems == [
        "snapshot.yaml doc 7 ResourceClaim default/gpu: spec.devices.requests[0].exactly.count: "
        "must be an integer >= 1"
    ]


def test_all_problems_are_collected():
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ip-10-0-1-9", "labels": {"gpu": True}},
        "status": {"allocatable": {"cpu": "4x", "memory": "16Gi"}},
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml"}, "spec": {}}
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s1"},
        "spec": {"pool": {"name": "p", "generation": -1}, "devices": [{"attributes": {}}]},
    }
    problems = problems_of([("c.yaml", yaml.safe_dump_all([node, pod, slice_]))])
    assert (
        problems[0]
        == "c.yaml doc 1 Node ip-10-0-1-9: metadata.labels.gpu: must be a string, not a boolean"
    )
    assert problems[1].startswith(
        "c.yaml doc 1 Node ip-10-0-1-9: status.allocatable.cpu: invalid quantity"
    )
    assert "'4x'" in problems[1]
    assert problems[2] == "c.yaml doc 2 Pod ml/<unnamed>: metadata.name: required"
    assert problems[3:] == [
        "c.yaml doc 3 ResourceSlice s1: spec.driver: required",
        "c.yaml doc 3 ResourceSlice s1: spec.pool.generation: must be an integer >= 0",
        "c.yaml doc 3 ResourceSlice s1: spec.devices[0].name: required",
    ]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["spec"]["devices"].__setitem__("requests", [{"name": "gpu"}]),
            "spec.devices.requests[0]: exactly one of exactly or firstAvailable must be set",
        ),
        (
            lambda d: d["spec"]["devices"]["requests"][0]["exactly"].__setitem__(
                "allocationMode", "Some"
            ),
            "spec.devices.requests[0].exactly.allocationMode: must be ExactCount or All",
        ),
        (
            lambda d: d["spec"]["devices"]["requests"][0]["exactly"].pop("deviceClassName"),
            "spec.devices.requests[0].exactly.deviceClassName: required",
        ),
        (
            lambda d: d["spec"]["devices"].__setitem__(
                "constraints", [{"requests": ["tpu"], "matchAttribute": "model"}]
            ),
            "spec.devices.constraints[0].requests[0]: unknown request 'tpu'",
        ),
        (
            lambda d: d["spec"]["devices"]["requests"][0]["exactly"].__setitem__(
                "capacity", {"requests": {"memory": "lots"}}
            ),
            "spec.devices.requests[0].exactly.capacity.requests.memory: invalid quantity",
        ),
        (
            lambda d: d["spec"]["devices"]["requests"][0]["exactly"].__setitem__(
                "tolerations", [{"key": "k", "operator": "Matches"}]
            ),
            "spec.devices.requests[0].exactly.tolerations[0].operator: must be Equal or Exists",
        ),
        (
            lambda d: d.__setitem__("spec", ["not", "an", "object"]),
            "spec: must be an object, not a list",
        ),
    ],
)
def test_claim_problems(mutate, expected):
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    load_files([("ok.yaml", yaml.safe_dump(doc))])  # valid before the mutation
    mutate(doc)
    problem = one_problem(doc)
    assert problem.startswith("bad.yaml doc 1 ResourceClaim ml/gpu: ")
    assert expected in problem


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"model": {"string": 7}}, "spec.devices[0].attributes.model.string: must be a string"),
        ({"model": {}}, "spec.devices[0].attributes.model: must set exactly one of"),
        ({"index": {"int": "0"}}, "spec.devices[0].attributes.index.int: must be an integer"),
        ({"ok": {"bool": "yes"}}, "spec.devices[0].attributes.ok.bool: must be true or false"),
        ({"ids": {"ints": [1, "2"]}}, "spec.devices[0].attributes.ids.ints[1]: must be an integer"),
    ],
)
def test_attribute_problems(attributes, expected):
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "allNodes": True,
            "pool": {"name": "p"},
            "devices": [{"name": "gpu-0", "attributes": attributes}],
        },
    }
    assert one_problem(doc).startswith(f"bad.yaml doc 1 ResourceSlice s: {expected}")


def test_requirement_and_selector_problems():
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        {
                            "key": "karpenter.k8s.aws/instance-gpu-count",
                            "operator": "Gt",
                            "values": ["x"],
                        },
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": []},
                        {"key": "kubernetes.io/arch", "operator": "Like", "values": ["amd64"]},
                    ]
                }
            }
        },
    }
    problems = problems_of([("np.yaml", yaml.safe_dump(pool))])
    assert problems == [
        "np.yaml doc 1 NodePool gpu: spec.template.spec.requirements[0]: key "
        "karpenter.k8s.aws/instance-gpu-count: operator Gt needs exactly one integer value, "
        "got ['x']",
        "np.yaml doc 1 NodePool gpu: spec.template.spec.requirements[1].values: must not be "
        "empty for operator In",
        "np.yaml doc 1 NodePool gpu: spec.template.spec.requirements[2]: key kubernetes.io/arch: "
        "unknown operator 'Like'; expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
    ]


def test_duplicates_and_unknown_fields():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}, "futureField": 1}
    problems = problems_of([("a.yaml", yaml.safe_dump(ns)), ("b.json", json.dumps(ns))])
    assert problems == [
        "b.json doc 1 Namespace ml: metadata.name: duplicate Namespace (first defined in a.yaml doc 1)"
    ]
    # The same name in another namespace is not a duplicate; unknown fields survive in raw.
    claims = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": n},
            "spec": {"spec": {"devices": {"requests": []}}, "futureField": {"x": 1}},
        }
        for n in ("ml", "default")
    ]
    snapshot = load_files([("t.yaml", yaml.safe_dump_all([ns, *claims]))])
    assert set(snapshot.resource_claim_templates) == {"ml/gpu", "default/gpu"}
    assert snapshot.namespaces["ml"].raw["futureField"] == 1
    assert snapshot.resource_claim_templates["ml/gpu"].raw["spec"]["futureField"] == {"x": 1}


def test_unknown_kinds_and_foreign_groups_are_warnings():
    docs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ml"}},
        {"apiVersion": "example.com/v1", "kind": "NodePool", "metadata": {"name": "other"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
    ]
    snapshot = load_files([("mixed.yaml", yaml.safe_dump_all(docs))])
    assert snapshot.warnings == [
        "mixed.yaml doc 1 ConfigMap ml/c: unknown kind ConfigMap (v1), skipped",
        "mixed.yaml doc 2 NodePool other: unknown kind NodePool (example.com/v1), skipped",
    ]
    assert snapshot.node_pools == {}


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "bad.yaml",
            "kind: Node\nmetadata: {name: [\n",
            "bad.yaml line 3 column 1: malformed YAML",
        ),
        ("bad.yaml", "a: b\n  c: d\n", "bad.yaml line 2 column 4: malformed YAML"),
        (
            "bad.json",
            '{"kind": "Node",\n "metadata": }',
            "bad.json line 2 column 14: malformed JSON",
        ),
        ("bin.yaml", b"\xff\xfe\x00", "bin.yaml: not UTF-8 text"),
        ("scalar.yaml", "just a string\n", "scalar.yaml doc 1: must be an object, not str"),
        ("nokind.yaml", "metadata: {name: x}\n", "nokind.yaml doc 1: kind: required"),
    ],
)
def test_malformed_files(name, content, expected):
    problems = problems_of([(name, content)])
    assert problems[0].startswith(expected), problems


def test_empty_snapshot_is_an_error():
    assert problems_of([("empty.yaml", "---\n")]) == ["snapshot holds no recognised objects"]


def test_kwok_problems():
    bad = [
        {
            "name": "c-1x",
            "offerings": [{"Price": "cheap", "Available": True}],
            "resources": {"cpu": "one"},
        }
    ]
    problems = problems_of([("it.json", json.dumps(bad))])
    assert "it.json doc 1 InstanceType c-1x: offerings[0]: no zone" in problems[0]
    assert any("offerings[0].Price: must be a number" in p for p in problems)
    # Paths as written in the user's file, each problem once (not again as spec.capacity.cpu).
    assert any(
        "it.json doc 1 InstanceType c-1x: resources.cpu: invalid quantity" in p for p in problems
    )
    assert not any("spec." in p for p in problems)
    assert len(problems) == len(set(problems)) == 4


def test_instance_type_binding_must_name_template_device():
    doc = [d for d in known_docs() if d["kind"] == "InstanceType"][0]
    doc["spec"]["dynamicResources"]["attributeBindings"][0]["devices"][1]["device"] = "nic-9"
    assert one_problem(doc) == (
        "bad.yaml doc 1 InstanceType p5.48xlarge: "
        "spec.dynamicResources.attributeBindings[0].devices[1]: device "
        "nic.example.com/p5-nics/nic-9 is not in this instance type's resourceSliceTemplates"
    )


def test_large_snapshot_loads_fast():
    # 500 slices of 8 GPUs each (about 3 MB of JSON) must load in well under 5 seconds (a
    # guard against quadratic behaviour; the 20 MB measurement lives outside the tests).
    slice_doc = known_docs()[2]
    docs = []
    for i in range(500):
        d = copy.deepcopy(slice_doc)
        d["metadata"]["name"] = f"node-{i}-gpu"
        d["metadata"]["ownerReferences"][0]["name"] = f"node-{i}"
        d["spec"]["nodeName"] = f"node-{i}"
        d["spec"]["pool"]["name"] = f"node-{i}"
        d["spec"]["devices"] = [
            {**copy.deepcopy(slice_doc["spec"]["devices"][0]), "name": f"gpu-{j}"} for j in range(8)
        ]
        docs.append(d)
    content = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    start = time.perf_counter()
    snapshot = load_files([("big.json", content)])
    elapsed = time.perf_counter() - start
    assert len(snapshot.resource_slices) == 500
    assert sum(len(s.devices) for s in snapshot.resource_slices) == 4000
    assert elapsed < 5.0, f"{len(content) / 1e6:.1f} MB took {elapsed:.2f}s"


def test_unquoted_timestamps_stay_strings():
    text = """
apiVersion: v1
kind: Pod
metadata:
  name: train-1
  namespace: ml
  creationTimestamp: 2026-12-01T10:00:00Z
  deletionTimestamp: 2026-12-01T11:00:00Z
spec:
  containers: [{name: trainer}]
"""
    snapshot = load_files([("pods.yaml", text)])
    (pod,) = snapshot.pods
    assert pod.creation_timestamp == "2026-12-01T10:00:00Z" and pod.deleting
    json.dumps(snapshot.documents)  # raw documents stay JSON-serialisable


def test_unknown_device_fields_are_kept_raw():
    doc = copy.deepcopy(known_docs()[2])
    mappings = {"cpu": {"capacityKey": "cores", "allocationMultiplier": "1"}}
    doc["spec"]["devices"][0]["nodeAllocatableResourceMappings"] = mappings
    doc["spec"]["devices"][0]["futureField"] = {"enabled": True}
    (rs,) = load_files([("slice.json", json.dumps(doc))]).resource_slices
    assert rs.devices[0].raw["nodeAllocatableResourceMappings"] == mappings
    assert rs.devices[0].raw["futureField"] == {"enabled": True}
    assert rs.devices[0].raw["nodeAllocatableResources"] == {"memory": "2Gi"}


def test_v1beta1_shapes_under_v1_are_explained():
    slice_doc = yaml.safe_load((FIXTURES / "v1beta1.yaml").read_text().split("---")[0])
    slice_doc["apiVersion"] = "resource.k8s.io/v1"
    problems = problems_of([("s.yaml", yaml.safe_dump(slice_doc))])
    assert problems[0] == (
        "s.yaml doc 1 ResourceSlice worker-1-gpu.example.com-4mx9q: spec.devices[0].basic: only "
        "resource.k8s.io/v1beta1 wraps device fields in basic; set apiVersion to "
        "resource.k8s.io/v1beta1 or move the fields up"
    )
    claim = yaml.safe_load((FIXTURES / "v1beta1.yaml").read_text().split("---")[1])
    claim["apiVersion"] = "resource.k8s.io/v1"
    problems = problems_of([("c.yaml", yaml.safe_dump(claim))])
    assert problems[0] == (
        "c.yaml doc 1 ResourceClaim default/two-gpus: spec.devices.requests[0]: exactly one of "
        "exactly or firstAvailable must be set (deviceClassName on the request is the v1beta1 "
        "shape)"
    )


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"name": ""}, "bad.yaml doc 1 Node <unnamed>: metadata.name: required"),
        ({"name": 7}, "bad.yaml doc 1 Node <unnamed>: metadata.name: must be a string"),
        ("node-a", "bad.yaml doc 1 Node <unnamed>: metadata: must be an object"),
        (None, "bad.yaml doc 1 Node <unnamed>: metadata: required"),
    ],
)
def test_metadata_problems(metadata, expected):
    assert one_problem({"apiVersion": "v1", "kind": "Node", "metadata": metadata}) == expected


def test_instance_type_templates_keep_every_field_as_written():
    # Features read fields the typed model does not carry (skipNodeOperations on the slice,
    # nodeAllocatableResources on a device): new NodeClaims need them as much as nodes do.
    doc = {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": "c7i.metal-48xl"},
        "spec": {
            "capacity": {"cpu": "192", "memory": "384Gi", "pods": "737"},
            "offerings": [{"zone": "us-west-2a", "capacityType": "on-demand", "price": 9.6}],
            "dynamicResources": {
                "resourceSliceTemplates": [
                    {
                        "driver": "cpu.example.com",
                        "pool": {"name": "cpus"},
                        "skipNodeOperations": ["*"],
                        "devices": [
                            {
                                "name": "socket0cpus",
                                "allowMultipleAllocations": True,
                                "capacity": {"cpu.example.com/cpu": {"value": "96"}},
                                "nodeAllocatableResources": {
                                    "mapping": {"cpu": {"capacityKey": "cpu.example.com/cpu"}}
                                },
                            }
                        ],
                    }
                ]
            },
        },
    }
    snapshot = load_files([("it.json", json.dumps(doc))])
    (t,) = snapshot.instance_types["c7i.metal-48xl"].resource_slice_templates
    assert t.raw["skipNodeOperations"] == ["*"]
    (device,) = t.devices
    assert device.allow_multiple_allocations is True
    assert device.raw["nodeAllocatableResources"] == {
        "mapping": {"cpu": {"capacityKey": "cpu.example.com/cpu"}}
    }
