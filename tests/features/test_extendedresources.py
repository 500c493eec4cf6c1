"""Extended resources served by DRA (KEP-5004, gate DRAExtendedResource).

KEP-5004: "the scheduler ... checks if the node has the extended resource in its allocatable; if
not, and a DeviceClass maps the extended resource name, it creates a ResourceClaim for the pod";
the DeviceClass API: "If two device classes have the same name, then the class created later is
picked ... If two classes are created at the same time, then the name of the class
lexicographically sorted first is picked."
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from allocator.featuregates import FeatureGates
from allocator.features import extendedresources as ext
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import SnapshotError, load_files
from allocator.snapshot.names import extended_resource_name_problem
from tests.features.conftest import EXAMPLES, load_example

EXAMPLE = "features-extended-resources.yaml"


def _docs() -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLES / EXAMPLE).read_text()) if d]


def _run(docs: list[dict], **gates: bool) -> dict:
    snapshot = load_files([("snapshot.yaml", yaml.safe_dump_all(docs))])
    options = SimulationOptions(gates=FeatureGates.from_mapping(gates), suggestions=False)
    return simulate(snapshot, options).result


def _pods(result: dict) -> dict[str, dict]:
    return {p["pod"].split("/", 1)[1]: p for p in result["pods"]}


_GPU_STACKS = {"kind-worker": "dra", "legacy-worker": "device-plugin"}


def _pod(name: str, limits: dict, *, node: str | None = None, init: list | None = None) -> dict:
    spec: dict = {
        "containers": [
            {
                "name": "ctr0",
                "image": "ubuntu:22.04",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": limits},
            }
        ]
    }
    if node:
        # The example's nodes are told apart by this label (Karpenter ignores pods selecting
        # kubernetes.io/hostname).
        spec["nodeSelector"] = {"example.com/gpu-stack": _GPU_STACKS[node]}
    if init:
        spec["initContainers"] = init
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "gpu-test-ext",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-03-02T11:00:00Z",
        },
        "spec": spec,
    }


def _without_pods(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["kind"] != "Pod"]


@pytest.fixture(scope="module")
def demo() -> dict:
    return _pods(_run(_docs()))


# --- the demo ----------------------------------------------------------------------------------


def test_a_resource_no_node_offers_is_served_by_the_device_class_that_names_it(demo) -> None:
    pod = demo["gpu-test-0"]
    assert pod["scheduled"] and pod["target"] == {
        "kind": "Node",
        "name": "kind-worker",
        "new": False,
    }
    (claim,) = pod["claims"]
    assert claim["claim"] == "gpu-test-ext/gpu-test-0-extended-resources"
    assert claim["state"] == "unallocated"
    # kube-scheduler names the request container-<container>-request-<index of the resource
    # among the container's sorted request names>: cpu, example.com/gpu, memory.
    assert [(d["request"], d["driver"], d["pool"], d["device"], d["source"]) for d in claim["devices"]] == [
        ("container-0-request-1", "gpu.example.com", "kind-worker", "gpu-0", "in-cluster")
    ]  # fmt: skip
    assert claim["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
        "kind-worker"
    ]


def test_the_implicit_class_name_is_served_by_that_class(demo) -> None:
    pod = demo["gpu-test-1"]
    (claim,) = pod["claims"]
    assert claim["claim"] == "gpu-test-ext/gpu-test-1-extended-resources"
    assert [d["device"] for d in claim["devices"]] == ["gpu-1"]


def test_a_node_that_offers_the_resource_natively_serves_it_natively(demo) -> None:
    pod = demo["legacy-0"]
    assert pod["scheduled"] and pod["target"]["name"] == "legacy-worker"
    assert pod["claims"] == []  # counted against allocatable, no claim


def test_a_new_nodeclaim_gets_the_devices_from_its_instance_type_templates(demo) -> None:
    pod = demo["gpu-test-2"]
    assert pod["target"] == {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}
    (claim,) = pod["claims"]
    # The init container needs 2: it reuses the container's GPU and asks for one more.
    assert [(d["request"], d["device"], d["instanceType"]) for d in claim["devices"]] == [
        ("container-0-request-0", "gpu-0", "gpu-2x"),
        ("container-1-request-1", "gpu-1", "gpu-2x"),
    ]


def test_a_resource_nobody_offers_and_no_class_names_stays_unschedulable(demo) -> None:
    pod = demo["fpga-0"]
    assert not pod["scheduled"] and pod["claims"] == []
    assert "no instance type had enough resources" in pod["error"]
    assert "vendor.example.com/fpga" in pod["error"]


def test_with_the_gate_off_it_stays_a_plain_extended_resource() -> None:
    pods = _pods(_run(_docs(), DRAExtendedResource=False))
    for name in ("gpu-test-0", "gpu-test-1", "gpu-test-2"):
        assert not pods[name]["scheduled"], name
        assert pods[name]["claims"] == []
    assert (
        'exceeds node resources, requests {"cpu":"500m","example.com/gpu":"1"'
        in (pods["gpu-test-0"]["error"])
    )
    assert "no instance type had enough resources" in pods["gpu-test-2"]["error"]
    assert pods["legacy-0"]["scheduled"]  # the device plugin's GPUs are still there


def test_the_gate_is_listed_and_on_by_default() -> None:
    result = _run(_docs())
    assert result["featureGates"]["DRAExtendedResource"] is True
    assert _run(_docs(), DRAExtendedResource=False)["featureGates"]["DRAExtendedResource"] is False


# --- refusals and explanations -----------------------------------------------------------------


def test_too_many_gpus_fail_with_a_funnel_naming_the_pods_claim() -> None:
    docs = _without_pods(_docs()) + [_pod("big-0", {"example.com/gpu": "3"}, node="kind-worker")]
    pod = _pods(_run(docs))["big-0"]
    assert not pod["scheduled"]
    assert "gpu-test-ext/big-0-extended-resources" in pod["error"]
    (claim,) = pod["claims"]
    assert claim == {
        "claim": "gpu-test-ext/big-0-extended-resources",
        "state": "unallocated",
        "devices": [],
        "nodeSelector": None,
    }
    funnels = [f for f in pod["explanation"] if f["exampleTargets"] == ["node/kind-worker"]]
    assert funnels, pod["explanation"]
    funnel = funnels[0]
    assert funnel["claim"] == "gpu-test-ext/big-0-extended-resources"
    assert funnel["request"] == "container-0-request-1"
    assert funnel["needed"] == 3
    assert funnel["candidates"] == 2 and funnel["usable"] == 2


def test_a_node_full_of_native_gpus_refuses_with_the_allocatable_message() -> None:
    docs = _without_pods(_docs()) + [
        _pod("legacy-big", {"example.com/gpu": "3"}, node="legacy-worker")
    ]
    docs[-1]["spec"]["tolerations"] = [{"key": "example.com/device-plugin", "operator": "Exists"}]
    pod = _pods(_run(docs))["legacy-big"]
    assert not pod["scheduled"]
    reasons = {r["target"]: r["reason"] for r in pod["reasons"]}
    # Natively offered (allocatable 2): counted there, never moved to DRA.
    assert reasons["node/legacy-worker"].startswith("exceeds node resources")
    assert '"example.com/gpu":"3"' in reasons["node/legacy-worker"]


# --- instance types ----------------------------------------------------------------------------


def _instance_type(name: str, price: float, *, native_gpus: int = 0, templates: bool = True):
    it = copy.deepcopy(next(d for d in _docs() if d["kind"] == "InstanceType"))
    it["metadata"]["name"] = name
    it["spec"]["offerings"][0]["price"] = price
    if native_gpus:
        it["spec"]["capacity"]["example.com/gpu"] = str(native_gpus)
    if not templates:
        del it["spec"]["dynamicResources"]
    return it


def _catalog(*its) -> list[dict]:
    docs = [d for d in _without_pods(_docs()) if d["kind"] not in ("InstanceType", "Node")]
    return docs + list(its) + [_pod("train-0", {"example.com/gpu": "1"})]


def test_an_instance_type_offering_the_resource_natively_takes_it_without_a_claim() -> None:
    result = _run(_catalog(_instance_type("p-native", 1.0, native_gpus=4, templates=False)))
    pod = _pods(result)["train-0"]
    assert pod["scheduled"] and pod["claims"] == []
    assert result["nodeClaims"][0]["instanceTypes"] == ["p-native"]


def test_an_instance_type_without_it_serves_it_from_its_templates() -> None:
    result = _run(_catalog(_instance_type("g-dra", 1.0)))
    (claim,) = _pods(result)["train-0"]["claims"]
    assert claim["claim"] == "gpu-test-ext/train-0-extended-resources"
    assert [(d["device"], d["source"], d["instanceType"]) for d in claim["devices"]] == [
        ("gpu-0", "template", "g-dra")
    ]


def test_instance_types_differing_in_what_they_offer_natively_keep_the_cheapest_group() -> None:
    native = _instance_type("p-native", 3.0, native_gpus=4, templates=False)
    dra = _instance_type("g-dra", 2.0)
    result = _run(_catalog(native, dra))
    assert result["nodeClaims"][0]["instanceTypes"] == ["g-dra"]
    assert _pods(result)["train-0"]["claims"][0]["devices"][0]["instanceType"] == "g-dra"
    assert result["nodeClaims"][0]["instanceTypesPruned"] == [
        {
            "name": "p-native",
            "reason": "resources",
            "message": "serves example.com/gpu differently: the NodeClaim kept the instance "
            "types that serve it through DRA (cheapest offering first)",
        }
    ]
    native["spec"]["offerings"][0]["price"] = 1.0
    result = _run(_catalog(native, dra))
    assert result["nodeClaims"][0]["instanceTypes"] == ["p-native"]
    assert _pods(result)["train-0"]["claims"] == []


def test_without_the_gate_only_the_native_instance_type_fits() -> None:
    native = _instance_type("p-native", 3.0, native_gpus=4, templates=False)
    dra = _instance_type("g-dra", 2.0)
    result = _run(_catalog(native, dra), DRAExtendedResource=False)
    assert result["nodeClaims"][0]["instanceTypes"] == ["p-native"]
    result = _run(_catalog(dra), DRAExtendedResource=False)
    assert "no instance type had enough resources" in _pods(result)["train-0"]["error"]


# --- the claim's requests (kube-scheduler's createRequestsAndMappings) -------------------------


def _requests(pod_doc: dict) -> list[tuple[str, str, int]]:
    pod = load_files([("pod.yaml", yaml.safe_dump(pod_doc))]).pods[0]
    return ext.claim_requests(pod, {"example.com/gpu": "gpu.example.com"})


def _total(pod_doc: dict) -> tuple[int, int]:
    """(devices the claim asks for, the pod's request as PodRequests computes it)."""
    pod = load_files([("pod.yaml", yaml.safe_dump(pod_doc))]).pods[0]
    devices = sum(count for _, _, count in _requests(pod_doc))
    return devices, int(pod.requests["example.com/gpu"].as_int())


def _init(name: str, gpus: str, sidecar: bool = False) -> dict:
    c = {"name": name, "image": "busybox", "resources": {"limits": {"example.com/gpu": gpus}}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def test_an_init_container_asking_for_more_adds_only_the_difference() -> None:
    pod = _pod("p", {"example.com/gpu": "1"}, init=[_init("warmup", "2")])
    assert _requests(pod) == [
        ("container-0-request-0", "gpu.example.com", 1),
        ("container-1-request-1", "gpu.example.com", 1),
    ]
    assert _total(pod) == (2, 2)  # max(init 2, containers 1)


def test_an_init_container_asking_for_less_reuses_the_containers_devices() -> None:
    pod = _pod("p", {"example.com/gpu": "2"}, init=[_init("warmup", "1")])
    assert _requests(pod) == [("container-1-request-1", "gpu.example.com", 2)]
    assert _total(pod) == (2, 2)


def test_only_the_largest_init_container_extra_is_asked_for() -> None:
    pod = _pod("p", {"example.com/gpu": "1"}, init=[_init("a", "3"), _init("b", "2")])
    assert _requests(pod) == [
        ("container-0-request-0", "gpu.example.com", 2),
        ("container-2-request-1", "gpu.example.com", 1),
    ]
    assert _total(pod) == (3, 3)


def test_a_sidecar_adds_to_the_sum() -> None:
    pod = _pod("p", {"example.com/gpu": "1"}, init=[_init("proxy", "1", sidecar=True)])
    assert _requests(pod) == [
        ("container-0-request-0", "gpu.example.com", 1),
        ("container-1-request-1", "gpu.example.com", 1),
    ]
    assert _total(pod) == (2, 2)


def test_two_containers_get_one_request_each() -> None:
    pod = _pod("p", {"example.com/gpu": "1"})
    pod["spec"]["containers"].append(
        {"name": "ctr1", "image": "x", "resources": {"limits": {"example.com/gpu": "2"}}}
    )
    assert _requests(pod) == [
        ("container-0-request-1", "gpu.example.com", 1),
        ("container-1-request-0", "gpu.example.com", 2),
    ]


def test_an_init_container_needing_more_than_the_pod_fails_where_two_gpus_are_missing() -> None:
    init = [_init("warmup", "3")]
    docs = _without_pods(_docs()) + [
        _pod("warm-0", {"example.com/gpu": "1"}, node="kind-worker", init=init)
    ]
    pod = _pods(_run(docs))["warm-0"]
    assert not pod["scheduled"]
    assert "warm-0-extended-resources" in pod["error"]


# --- which class -------------------------------------------------------------------------------


def _class(name: str, created: str, ern: str | None = "example.com/gpu") -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}
    if ern:
        spec["extendedResourceName"] = ern
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": spec,
    }


def test_the_class_created_last_wins_then_the_name_sorted_first() -> None:
    snapshot = load_files(
        [
            (
                "classes.yaml",
                yaml.safe_dump_all(
                    [
                        _class("gpu-old", "2026-01-01T00:00:00Z"),
                        _class("gpu-new-b", "2026-02-01T00:00:00Z"),
                        _class("gpu-new-a", "2026-02-01T00:00:00Z"),
                        _class("plain", "2026-03-01T00:00:00Z", ern=None),
                    ]
                ),
            )
        ]
    )
    mapping = ext.class_mapping(snapshot.device_classes)
    assert mapping["example.com/gpu"] == "gpu-new-a"
    assert mapping["deviceclass.resource.kubernetes.io/gpu-old"] == "gpu-old"
    assert mapping["deviceclass.resource.kubernetes.io/plain"] == "plain"


def test_a_pods_allocated_claim_of_an_earlier_cycle_is_used_as_it_is() -> None:
    docs = _without_pods(_docs()) + [_pod("again-0", {"example.com/gpu": "1"}, node="kind-worker")]
    docs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": "again-0-extended-resources-x7k2q",
                "namespace": "gpu-test-ext",
                "annotations": {ext.CLAIM_ANNOTATION: "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": "again-0",
                        "uid": "uid-again-0",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-1",
                            "exactly": {"deviceClassName": "gpu.example.com", "count": 1},
                        }
                    ]
                }
            },
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "container-0-request-1",
                                "driver": "gpu.example.com",
                                "pool": "kind-worker",
                                "device": "gpu-1",
                            }
                        ]
                    }
                }
            },
        }
    )
    pod = _pods(_run(docs))["again-0"]
    assert pod["scheduled"]
    (claim,) = pod["claims"]
    assert claim["claim"] == "gpu-test-ext/again-0-extended-resources-x7k2q"
    assert claim["state"] == "allocated-in-cluster"
    assert [d["device"] for d in claim["devices"]] == ["gpu-1"]


# --- snapshot validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("gpu", "needs a domain prefix"),
        ("kubernetes.io/gpu", "reserved for native resources"),
        ("requests.example.com/gpu", "must not start with 'requests.'"),
        ("Example.COM/gpu", "lowercase DNS subdomain"),
        ("example.com/-gpu", "the name part"),
        # Go's regexp ends at the text's end: no trailing newline slips past "$".
        ("example.com/gpu\n", "the name part"),
        ("example.com\n/gpu", "lowercase DNS subdomain"),
    ],
)
def test_a_bad_extended_resource_name_names_file_object_and_field(name: str, why: str) -> None:
    with pytest.raises(SnapshotError) as err:
        load_files([("classes.yaml", yaml.safe_dump(_class("gpu.example.com", "x", ern=name)))])
    (problem,) = err.value.problems
    assert problem.startswith("classes.yaml doc 1 DeviceClass gpu.example.com: ")
    assert f"spec.extendedResourceName: {name!r} must be a valid extended resource name" in problem
    assert why in problem


def test_good_extended_resource_names() -> None:
    for name in ("example.com/gpu", "nvidia.com/gpu", "gpu.example.com/a100_80gb", "x.io/a.b-c"):
        assert extended_resource_name_problem(name) is None, name
    assert ext.is_dra_extended_resource_name("deviceclass.resource.kubernetes.io/gpu.example.com")
    assert not ext.is_dra_extended_resource_name("cpu")
    assert not ext.is_dra_extended_resource_name("hugepages-2Mi")


def test_the_example_loads() -> None:
    snapshot = load_example(EXAMPLE)
    assert snapshot.device_classes["gpu.example.com"].extended_resource_name == "example.com/gpu"


# --- fix suggestions ---------------------------------------------------------------------------


def test_fewer_gpus_are_suggested_on_the_pods_container_and_the_change_applies() -> None:
    from allocator.suggestions import apply_change

    docs = _without_pods(_docs()) + [_pod("big-0", {"example.com/gpu": "3"}, node="kind-worker")]
    snapshot = load_files([("snapshot.yaml", yaml.safe_dump_all(docs))])
    pod = _pods(simulate(snapshot, SimulationOptions()).result)["big-0"]
    counts = [s for s in pod["suggestions"] if s["kind"] == "reduce-count"]
    assert counts, pod["suggestions"]
    (suggestion,) = counts
    # The scheduler's claim is not the user's to edit: the container's resources are.
    assert suggestion["change"] == {
        "object": "Pod gpu-test-ext/big-0",
        "field": "spec.containers[0].resources",
        "op": "set",
        "value": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"example.com/gpu": "2"}},
    }
    assert suggestion["target"] == {"kind": "Node", "name": "kind-worker", "new": False}
    assert "reduce example.com/gpu of container ctr0" in suggestion["message"]
    assert not any("ResourceClaim" in s["change"].get("object", "") for s in pod["suggestions"])
    fixed = _pods(_run(apply_change(docs, suggestion["change"])))["big-0"]
    assert fixed["scheduled"] and fixed["target"]["name"] == "kind-worker"
    assert len(fixed["claims"][0]["devices"]) == 2


def test_an_init_containers_extra_is_reduced_on_the_init_container() -> None:
    from allocator.suggestions import apply_change

    init = [_init("warmup", "3")]
    docs = _without_pods(_docs()) + [
        _pod("warm-0", {"example.com/gpu": "1"}, node="kind-worker", init=init)
    ]
    snapshot = load_files([("snapshot.yaml", yaml.safe_dump_all(docs))])
    pod = _pods(simulate(snapshot, SimulationOptions()).result)["warm-0"]
    (suggestion,) = [s for s in pod["suggestions"] if s["kind"] == "reduce-count"]
    assert suggestion["change"]["field"] == "spec.initContainers[0].resources"
    assert suggestion["change"]["value"] == {"limits": {"example.com/gpu": "2"}}
    assert _pods(_run(apply_change(docs, suggestion["change"])))["warm-0"]["scheduled"]


# --- alongside the pod's own claims, and edge cases ---------------------------------------------


def test_the_schedulers_claim_comes_after_the_pods_own_claims() -> None:
    nic_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "nic.example.com"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "nic.example.com"'}}]},
    }
    nic_slice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "kind-worker-nics"},
        "spec": {
            "driver": "nic.example.com",
            "nodeName": "kind-worker",
            "pool": {"name": "kind-worker-nics", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "eth1"}],
        },
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "rdma-nic", "namespace": "gpu-test-ext"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "nic", "exactly": {"deviceClassName": "nic.example.com"}}]
                }
            }
        },
    }
    pod = _pod("mixed-0", {"example.com/gpu": "1"}, node="kind-worker")
    pod["spec"]["resourceClaims"] = [{"name": "nic", "resourceClaimTemplateName": "rdma-nic"}]
    docs = _without_pods(_docs()) + [nic_class, nic_slice, template, pod]
    result = _pods(_run(docs))["mixed-0"]
    assert result["scheduled"]
    assert [c["claim"] for c in result["claims"]] == [
        "gpu-test-ext/mixed-0-nic",
        "gpu-test-ext/mixed-0-extended-resources",
    ]
    assert [d["device"] for c in result["claims"] for d in c["devices"]] == ["eth1", "gpu-0"]


def test_an_allocatable_of_zero_is_not_offering_it() -> None:
    docs = _without_pods(_docs())
    node = next(d for d in docs if d["metadata"]["name"] == "kind-worker")
    node["status"]["allocatable"]["example.com/gpu"] = "0"  # a device plugin with none left
    docs.append(_pod("zero-0", {"example.com/gpu": "1"}, node="kind-worker"))
    pod = _pods(_run(docs))["zero-0"]
    assert pod["scheduled"]
    assert pod["claims"][0]["claim"] == "gpu-test-ext/zero-0-extended-resources"


def test_a_fractional_quantity_stays_a_plain_extended_resource() -> None:
    docs = _without_pods(_docs()) + [
        _pod("half-0", {"example.com/gpu": "500m"}, node="kind-worker")
    ]
    pod = _pods(_run(docs))["half-0"]
    assert not pod["scheduled"] and pod["claims"] == []
    assert "exceeds node resources" in pod["error"]


def test_the_trace_shows_the_schedulers_claim() -> None:
    snapshot = load_example(EXAMPLE)
    out = simulate(snapshot, SimulationOptions(trace=True, suggestions=False))
    labels = [n["label"] for n in out.trace["nodes"] if n["kind"] == "claim"]
    assert "gpu-test-ext/gpu-test-0-extended-resources" in labels


def test_a_plain_init_container_reuses_the_devices_of_a_sidecar_that_starts_after_it() -> None:
    init = [_init("warmup", "2"), _init("proxy", "1", sidecar=True)]
    pod = _pod("p", {"example.com/gpu": "1"}, init=init)
    assert _requests(pod) == [
        ("container-1-request-0", "gpu.example.com", 1),
        ("container-2-request-1", "gpu.example.com", 1),
    ]
    assert _total(pod) == (2, 2)


def test_the_command_line_takes_the_gate(capsys) -> None:
    from allocator.cli import main

    path = str(EXAMPLES / EXAMPLE)
    assert main(["simulate", path, "--json", "--feature-gates", "DRAExtendedResource=false"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["featureGates"]["DRAExtendedResource"] is False
    assert not _pods(result)["gpu-test-0"]["scheduled"]
