"""CONTRACT section 4: the result document, field by field."""

from __future__ import annotations

import re

import pytest

from tests.contract.conftest import (
    ALL_GATES,
    claim_template,
    device_class,
    gpu_cluster,
    gpu_devices,
    namespace,
    node,
    pod,
    request,
    resource_slice,
    simulate,
)

STATES = {"unallocated", "allocated-in-cluster", "allocated-in-memory", "reallocated"}
# Kubernetes' canonical quantity form: an integer with an optional suffix (no "1000m", no "1.0").
CANONICAL = re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def _all_docs(demo, feature_results):
    return [demo, *feature_results.values()]


def test_top_level_fields_and_types(demo):
    assert demo["schemaVersion"] == "v1"
    for key in ("pods", "nodeClaims", "pools", "deviceTaintRules"):
        assert isinstance(demo[key], list), key
    assert isinstance(demo["featureGates"], dict)
    assert list(demo["featureGates"]) and set(demo["featureGates"]) == set(ALL_GATES)
    stats = demo["stats"]
    for key in ("pods", "scheduled", "failed", "dfsNodes"):
        assert isinstance(stats[key], int) and not isinstance(stats[key], bool), key
    assert isinstance(stats["seconds"], (int, float)) and stats["seconds"] >= 0
    assert stats["pods"] == len(demo["pods"]) == stats["scheduled"] + stats["failed"]
    assert stats["scheduled"] == sum(p["scheduled"] for p in demo["pods"])
    assert stats["dfsNodes"] > 0


def test_result_validates_against_the_published_schema(demo, feature_results):
    import json

    import jsonschema

    from tests.contract.conftest import ROOT

    schema = json.loads((ROOT / "allocator" / "result_schema.json").read_text())
    for doc in _all_docs(demo, feature_results):
        jsonschema.validate(doc, schema)


def test_pod_entries(demo, feature_results):
    for doc in _all_docs(demo, feature_results):
        for entry in doc["pods"]:
            assert re.fullmatch(r"[a-z0-9.-]+/[a-z0-9.-]+", entry["pod"]), entry["pod"]
            assert isinstance(entry["scheduled"], bool)
            assert isinstance(entry["claims"], list)
            assert "error" in entry
            if entry["scheduled"]:
                assert entry["error"] is None
                target = entry["target"]
                assert set(target) >= {"kind", "name", "new"}
                assert target["kind"] in ("Node", "NodeClaim")
                if target["kind"] == "Node":
                    assert target["new"] is False


def test_target_new_flags(demo):
    created = {nc["name"] for nc in demo["nodeClaims"]}
    kinds = set()
    for entry in demo["pods"]:
        target = entry["target"]
        if not target:
            continue
        kinds.add((target["kind"], target["new"]))
        if target["kind"] == "NodeClaim":
            assert target["new"] == (target["name"] in created), entry
    # The demo has all three: nodes, new NodeClaims and an unregistered existing NodeClaim.
    assert kinds == {("Node", False), ("NodeClaim", True), ("NodeClaim", False)}


def test_unscheduled_pods_have_null_target_error_and_reasons(demo):
    failed = [p for p in demo["pods"] if not p["scheduled"]]
    assert failed
    for entry in failed:
        assert entry["target"] is None
        assert isinstance(entry["error"], str) and entry["error"]
        assert entry["reasons"], entry["pod"]
        for reason in entry["reasons"]:
            assert set(reason) >= {"target", "reason"}
            assert re.fullmatch(r"(node|nodepool)/[a-z0-9.-]+", reason["target"]), reason
            assert isinstance(reason["reason"], str) and reason["reason"]
        # NodePool reasons last, in the error as in the list.
        kinds = [r["target"].split("/")[0] for r in entry["reasons"]]
        assert kinds == sorted(kinds, key=lambda k: k == "nodepool"), kinds
        last_pool = [r for r in entry["reasons"] if r["target"].startswith("nodepool/")]
        if last_pool:
            assert entry["error"].rstrip().endswith(last_pool[-1]["reason"].rstrip()[-40:])


def test_design_error_substrings_appear_verbatim(demo):
    errors = " ".join(p["error"] for p in demo["pods"] if p["error"])
    for text in (
        "no instance type can satisfy the allocation",
        "incompatible",
        "not found",
        "exceeding maximum",
        "admin access",
    ):
        assert text in errors, text


def test_admin_access_error_in_unlabelled_namespace(feature_results):
    pods = {p["pod"]: p for p in feature_results["admin-access"]["pods"]}
    assert pods["default/dcgm-exporter"]["scheduled"] is False
    assert "admin access" in pods["default/dcgm-exporter"]["error"]
    ok = pods["monitoring/dcgm-exporter"]
    assert ok["scheduled"]
    devices = ok["claims"][0]["devices"]
    assert devices and all(d["adminAccess"] is True for d in devices)


def test_claim_entries(demo, feature_results):
    seen_states = set()
    for doc in _all_docs(demo, feature_results):
        for entry in doc["pods"]:
            for c in entry["claims"]:
                assert re.fullmatch(r"[a-z0-9.-]+/[a-z0-9.-]+", c["claim"])
                assert c["state"] in STATES
                seen_states.add(c["state"])
                assert "nodeSelector" in c
                assert c["nodeSelector"] is None or "nodeSelectorTerms" in c["nodeSelector"]
                has_bc = any(d.get("bindingConditions") for d in c["devices"])
                assert ("bindingTimeoutSeconds" in c) == has_bc, c
                if has_bc:
                    assert c["bindingTimeoutSeconds"] == 600
                for d in c["devices"]:
                    assert set(d) >= {
                        "request",
                        "driver",
                        "pool",
                        "device",
                        "source",
                        "instanceType",
                    }
                    assert d["source"] in ("in-cluster", "template")
                    assert (d["instanceType"] is None) == (d["source"] == "in-cluster")
    # allocated-in-cluster is covered by test_allocated_in_cluster_claim_lists_its_allocation.
    assert seen_states >= STATES - {"allocated-in-cluster"}


def test_binding_condition_fields(feature_results):
    pods = {p["pod"]: p for p in feature_results["binding-conditions"]["pods"]}
    claim = pods["default/fabric-job-2"]["claims"][0]
    assert claim["bindingTimeoutSeconds"] == 600
    device = claim["devices"][0]
    assert device["bindingConditions"] == ["dra.example.com/is-prepared"]
    assert device["bindingFailureConditions"] == ["dra.example.com/preparing-failed"]
    assert device["bindsToNode"] is True
    assert claim["nodeSelector"] is not None  # bindsToNode records the node


def test_template_devices_once_per_remaining_instance_type(demo):
    ncs = {nc["name"]: nc for nc in demo["nodeClaims"]}
    multi = 0
    for entry in demo["pods"]:
        target = entry["target"]
        if not target or not target["new"]:
            continue
        its = ncs[target["name"]]["instanceTypes"]
        for c in entry["claims"]:
            template = [d for d in c["devices"] if d["source"] == "template"]
            if not template:
                continue
            assert {d["instanceType"] for d in template} == set(its)
            slots = {(d["request"], d["instanceType"]) for d in template}
            per_it = len(template) // len(its)
            assert len(template) == per_it * len(its)
            assert len(slots) <= len(template)
            multi += len(its) > 1
    assert multi, "the demo has a NodeClaim with several instance types"


def test_in_cluster_devices_appear_once(demo, feature_results):
    for doc in _all_docs(demo, feature_results):
        for entry in doc["pods"]:
            for c in entry["claims"]:
                keys = [
                    (d["driver"], d["pool"], d["device"], d.get("shareID"))
                    for d in c["devices"]
                    if d["source"] == "in-cluster"
                ]
                assert len(keys) == len(set(keys)), c


def test_allocated_in_cluster_claim_lists_its_allocation(tmp_path):
    from tests.contract.conftest import claim

    allocated = claim(
        "shared",
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "gpu-node-1",
                            "device": "gpu-1",
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "holder", "uid": "1"}],
        },
    )
    docs = gpu_cluster(
        [
            pod(
                "holder",
                node_name="gpu-node-1",
                uid="1",
                claims=[{"name": "g", "resourceClaimName": "shared"}],
            ),
            pod("joiner", claims=[{"name": "g", "resourceClaimName": "shared"}]),
        ],
        extra=[allocated],
    )
    run = simulate(tmp_path, docs)
    c = run.pod("default/joiner")["claims"][0]
    assert c["state"] == "allocated-in-cluster"
    assert [(d["device"], d["source"]) for d in c["devices"]] == [("gpu-1", "in-cluster")]
    assert c["nodeSelector"] is None


def test_node_claims_fields_sorted(demo):
    assert demo["nodeClaims"]
    for nc in demo["nodeClaims"]:
        assert set(nc) >= {
            "name",
            "nodePool",
            "instanceTypes",
            "requirements",
            "annotations",
            "pods",
        }
        assert re.fullmatch(re.escape(nc["nodePool"]) + r"-[1-9][0-9]*", nc["name"])
        assert nc["instanceTypes"] == sorted(nc["instanceTypes"]) and nc["instanceTypes"]
        keys = [r["key"] for r in nc["requirements"]]
        assert keys == sorted(keys)
        for r in nc["requirements"]:
            assert set(r) >= {"key", "operator"}
            if "values" in r:
                assert r["values"] == sorted(r["values"])
        assert all(isinstance(v, str) for v in nc["annotations"].values())
        drivers = nc["annotations"].get("karpenter.sh/requested-dra-drivers")
        if drivers:
            assert drivers.split(",") == sorted(set(drivers.split(",")))
        pods = {p["pod"]: p for p in demo["pods"]}
        for key in nc["pods"]:
            assert pods[key]["target"]["name"] == nc["name"]


def test_pods_in_queue_order(demo):
    # CPU descending is the first key of the queue: the demo's pods come out by CPU.
    import yaml

    from tests.contract.conftest import DEMO

    def millis(q):
        return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)

    cpu = {}
    for doc in yaml.safe_load_all(DEMO.read_text()):
        if doc and doc["kind"] == "Pod":
            total = sum(
                millis(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
                for c in doc["spec"]["containers"]
            )
            cpu[f"{doc['metadata'].get('namespace', 'default')}/{doc['metadata']['name']}"] = total
    order = [cpu[p["pod"]] for p in demo["pods"]]
    assert order == sorted(order, reverse=True)


def test_consumable_capacity_fields(feature_results):
    entry = feature_results["consumable-capacity"]["pods"][0]
    device = entry["claims"][0]["devices"][0]
    assert device["consumedCapacity"] == {"bandwidth": "1G"}
    assert re.fullmatch(r"[0-9a-f-]{36}", device["shareID"])
    # consumedCapacity only for devices that allow multiple allocations.
    for doc in feature_results.values():
        for p in doc["pods"]:
            for c in p["claims"]:
                for d in c["devices"]:
                    assert ("consumedCapacity" in d) == ("shareID" in d)


def test_tolerations_only_where_a_taint_was_tolerated(feature_results):
    pods = {p["pod"]: p for p in feature_results["taints"]["pods"]}
    device = pods["ml-training/train-0"]["claims"][0]["devices"][0]
    assert device["tolerations"] == [{"operator": "Exists", "key": "dra.example.com/unhealthy"}]
    for doc in feature_results.values():
        for p in doc["pods"]:
            for c in p["claims"]:
                for d in c["devices"]:
                    assert d.get("tolerations", ["x"]) != []  # omitted when none


def test_first_available_reports_request_slash_subrequest(feature_results):
    devices = feature_results["prioritized-list"]["pods"][0]["claims"][0]["devices"]
    assert devices and all(d["request"] == "gpu/two-l4" for d in devices)


def test_quantities_are_canonical(demo, feature_results):
    def walk(value, path=""):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            for v in value:
                yield from walk(v, path)
        else:
            yield path, value

    checked = 0
    for doc in _all_docs(demo, feature_results):
        for p in doc["pods"]:
            for path, q in walk(p.get("draNodeResources") or {}):
                assert CANONICAL.match(q), (path, q)
                checked += 1
            for c in p["claims"]:
                for d in c["devices"]:
                    for path, q in walk(d.get("consumedCapacity") or {}):
                        assert CANONICAL.match(q), (path, q)
                        checked += 1
        for pool in doc["pools"]:
            for cap in (pool.get("shareableSummary") or {}).get("capacity", []):
                for key in ("total", "consumed", "available"):
                    assert CANONICAL.match(cap[key]), cap
                    checked += 1
    assert checked > 5


def test_canonical_form_of_a_quantity_given_in_another_form(tmp_path):
    tmpl = claim_template(
        "bw",
        requests=[request(cls="nic.example.com", capacity={"requests": {"bandwidth": "1000M"}})],
    )
    nics = [
        {
            "name": "eth1",
            "allowMultipleAllocations": True,
            "capacity": {"bandwidth": {"value": "10G"}},
        }
    ]
    docs = [
        namespace("default"),
        device_class("nic.example.com"),
        node("n1", cpu="8", memory="32Gi"),
        resource_slice("n1", nics, driver="nic.example.com", pool="n1-nics"),
        tmpl,
        pod("p", claims=[{"name": "net", "resourceClaimTemplateName": "bw"}]),
    ]
    run = simulate(tmp_path, docs)
    device = run.pod("default/p")["claims"][0]["devices"][0]
    assert device["consumedCapacity"] == {"bandwidth": "1G"}
    pool = run.doc["pools"][0]
    assert pool["shareableSummary"]["capacity"] == [
        {"name": "bandwidth", "total": "10G", "consumed": "1G", "available": "9G"}
    ]


def test_dra_node_resources_only_when_not_empty(feature_results, demo):
    pods = {p["pod"]: p for p in feature_results["node-allocatable"]["pods"]}
    assert pods["default/inference-x"]["draNodeResources"] == {"memory": "8Gi"}
    for doc in (demo, *feature_results.values()):
        for p in doc["pods"]:
            assert p.get("draNodeResources", {"x": 1}) != {}


POOL_FIELDS = {
    "driver",
    "pool",
    "nodeName",
    "generation",
    "resourceSliceCount",
    "totalDevices",
    "allocatedDevices",
    "availableDevices",
    "unavailableDevices",
    "validationError",
}


def test_pools_fields(demo, feature_results):
    assert demo["pools"]
    for doc in _all_docs(demo, feature_results):
        for pool in doc["pools"]:
            assert set(pool) >= POOL_FIELDS, pool
            if pool["validationError"] is not None:
                # KEP-5677: with a validation error the device counts may be unset.
                assert isinstance(pool["validationError"], str)
                continue
            for key in (
                "generation",
                "resourceSliceCount",
                "totalDevices",
                "allocatedDevices",
                "availableDevices",
                "unavailableDevices",
            ):
                assert isinstance(pool[key], int), key
            # KEP-5677: available = total - allocated - unavailable, floored at 0 (a tainted
            # allocated device counts in both allocated and unavailable).
            assert pool["availableDevices"] == max(
                0, pool["totalDevices"] - pool["allocatedDevices"] - pool["unavailableDevices"]
            )
    parts = feature_results["partitionable"]["pools"]
    summary = [p for p in parts if "partitionSummary" in p][0]["partitionSummary"]
    assert all(set(s) >= {"attribute", "type", "total", "allocatable"} for s in summary)
    shared = feature_results["consumable-capacity"]["pools"][0]["shareableSummary"]
    assert set(shared) >= {"fullyAvailableDevices", "partiallyAvailableDevices", "capacity"}
    assert all(set(c) >= {"name", "total", "consumed", "available"} for c in shared["capacity"])


def test_pool_not_node_local_has_null_node_name(tmp_path):
    network = resource_slice(None, gpu_devices(1), pool="fabric", name="fabric-gpus", allNodes=True)
    docs = [namespace("default"), device_class(), node("n1"), network]
    run = simulate(tmp_path, docs)
    pool = run.doc["pools"][0]
    assert pool["nodeName"] is None and pool["pool"] == "fabric"
    assert pool["validationError"] is None


def test_pools_counted_after_the_runs_allocations(tmp_path):
    docs = gpu_cluster(
        [pod("p", claims=[{"name": "g", "resourceClaimTemplateName": "one"}])],
        extra=[claim_template("one")],
    )
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["target"]["name"] == "gpu-node-1"
    pool = run.doc["pools"][0]
    assert (pool["totalDevices"], pool["allocatedDevices"], pool["availableDevices"]) == (2, 1, 1)


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute", "None"])
def test_device_taint_rules_fields(tmp_path, effect):
    from tests.contract.conftest import claim

    allocated = claim(
        "held",
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "gpu-node-1",
                            "device": "gpu-0",
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "holder", "uid": "h1"}],
        },
    )
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gpu-node-1"},
            "taint": {"key": "example.com/firmware", "value": "550", "effect": effect},
        },
    }
    docs = gpu_cluster(
        [
            pod(
                "holder",
                node_name="gpu-node-1",
                uid="h1",
                claims=[{"name": "g", "resourceClaimName": "held"}],
            )
        ],
        extra=[allocated, rule],
    )
    run = simulate(tmp_path, docs)
    (entry,) = run.doc["deviceTaintRules"]
    assert entry["name"] == "maintenance" and entry["effect"] == effect
    assert entry["publishedDevices"] == 2 and entry["allocatedDevices"] == 1
    assert entry["podsToEvict"] == (0 if effect == "NoSchedule" else 1)
    assert entry["namespaces"] == (0 if effect == "NoSchedule" else 1)
    for key in ("publishedDevices", "allocatedDevices", "podsToEvict", "namespaces"):
        assert isinstance(entry[key], int)


def test_error_conditions_summary_substrings(tmp_path):
    from tests.contract.conftest import cli, write_yaml

    t_sel = claim_template("t-sel", requests=[request(selectors=[{"futureSelector": {"x": 1}}])])
    t_con = claim_template("t-con")
    t_con["spec"]["spec"]["devices"]["constraints"] = [
        {"requests": ["gpu"], "futureConstraint": {"a": 1}}
    ]
    t_cel = claim_template(
        "t-cel", requests=[request(selectors=[{"cel": {"expression": "device.driver =="}}])]
    )
    t_first = claim_template(
        "t-first",
        requests=[
            {
                "name": "gpu",
                "firstAvailable": [{"name": "h100", "deviceClassName": "gpu.nvidia.com"}],
            }
        ],
    )
    t_all = claim_template("t-all", requests=[request(allocationMode="All")])
    t_many = claim_template("t-many", requests=[request(allocationMode="ExactCount", count=40)])
    incomplete = resource_slice("gpu-node-1", gpu_devices(2))
    incomplete["spec"]["pool"]["resourceSliceCount"] = 2
    # Two slices of one pool publishing the same device name: the pool is invalid.
    invalid = [
        resource_slice("gpu-node-2", gpu_devices(1), name=f"gpu-node-2-{i}") for i in range(2)
    ]
    for s in invalid:
        s["spec"]["pool"]["resourceSliceCount"] = 2
    cases = {
        "t-sel": "unsupported selector type",
        "t-con": "unsupported constraint type",
        "t-cel": "failed to compile",
        "t-first": "only Exactly requests",
        "t-all": "incomplete",
        "t-many": "exceeding maximum",
    }
    docs = [
        namespace("default"),
        device_class(),
        node("gpu-node-1", cpu="32", memory="256Gi"),
        incomplete,
        t_sel,
        t_con,
        t_cel,
        t_first,
        t_all,
        t_many,
        *[
            pod(f"p-{name}", claims=[{"name": "g", "resourceClaimTemplateName": name}])
            for name in cases
        ],
    ]
    run = cli(
        "simulate",
        write_yaml(tmp_path, docs),
        "--json",
        "--feature-gates",
        "DRAPrioritizedList=false",
    )
    assert run.status == 0, run.stderr
    for name, text in cases.items():
        entry = run.pod(f"default/p-{name}")
        assert entry["scheduled"] is False and text in entry["error"], (name, entry["error"])
    docs = [
        namespace("default"),
        device_class(),
        node("gpu-node-2", cpu="32", memory="256Gi"),
        *invalid,
        t_all,
        pod("p-all", claims=[{"name": "g", "resourceClaimTemplateName": "t-all"}]),
    ]
    run = simulate(tmp_path, docs)
    assert "invalid" in run.pod("default/p-all")["error"]


def test_allocated_in_memory_claim_reports_the_devices_chosen_then(tmp_path):
    from tests.contract.conftest import claim

    docs = gpu_cluster(
        [
            pod("a", cpu="2", claims=[{"name": "g", "resourceClaimName": "shared"}]),
            pod("b", cpu="1", claims=[{"name": "g", "resourceClaimName": "shared"}]),
        ],
        extra=[claim("shared")],
    )
    run = simulate(tmp_path, docs)
    first, second = run.pod("default/a")["claims"][0], run.pod("default/b")["claims"][0]
    assert (first["state"], second["state"]) == ("unallocated", "allocated-in-memory")
    assert second["devices"] == first["devices"] and first["devices"]
    assert run.pod("default/b")["target"] == run.pod("default/a")["target"]
