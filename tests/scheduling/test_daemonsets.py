"""The DaemonSet pods a new node would run (allocator/scheduling/daemonsets.py): the DaemonSet
object's newest pod or its template, pins dropped, and their requests as daemon overhead."""

from __future__ import annotations

import copy

import yaml

from allocator.scheduling.daemonsets import daemon_pods
from allocator.snapshot import load_files
from tests.scheduling.k8s import instance_type, node_pool, pod, run

NEEDS_GPU = {
    "key": "nvidia.com/gpu.present",
    "operator": "In",
    "values": ["true"],
}


def daemon_set(name: str = "nvidia-dcgm-exporter", cpu: str = "2", affinity=None) -> dict:
    spec: dict = {
        "containers": [
            {
                "name": "exporter",
                "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5",
                "ports": [{"containerPort": 9400, "hostPort": 9400}],
                "resources": {"limits": {"cpu": cpu, "memory": "1Gi"}},
            }
        ]
    }
    if affinity:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": affinity}]
                }
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "gpu-operator", "uid": f"uid-{name}"},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"spec": spec}},
    }


def ds_pod(name: str, node: str, created: str, ds: str = "nvidia-dcgm-exporter", cpu="500m"):
    """A pod the DaemonSet controller made: owned by it and pinned to its node by matchFields."""
    doc = pod(name, namespace="gpu-operator", cpu=cpu, node_name=node, created=created)
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds, "uid": f"uid-{ds}"}
    ]
    doc["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    return doc


def load(*docs):
    snapshot = load_files([("s.yaml", yaml.safe_dump_all(docs))])
    return daemon_pods(snapshot.daemon_sets, snapshot.pods)


def test_a_daemonset_without_pods_runs_its_template():
    (found,) = load(daemon_set())
    assert (found.namespace, found.name) == ("gpu-operator", "nvidia-dcgm-exporter")
    assert str(found.requests["cpu"]) == "2"  # limits read as requests (API defaulting)


def test_the_newest_pod_of_the_daemonset_stands_for_it_without_its_node_pin():
    (found,) = load(
        daemon_set(affinity=[NEEDS_GPU]),
        ds_pod("dcgm-a", "ip-10-0-1-7", "2026-12-01T08:00:00Z"),
        ds_pod("dcgm-b", "ip-10-0-1-8", "2026-12-01T09:00:00Z"),
    )
    assert found.name == "dcgm-b"
    # The template's affinity replaces the pod's (and with it the controller's node pin).
    assert found.required_node_affinity["nodeSelectorTerms"] == [{"matchExpressions": [NEEDS_GPU]}]
    (alone,) = load(ds_pod("dcgm-a", "ip-10-0-1-7", "2026-12-01T08:00:00Z"))
    assert alone.required_node_affinity["nodeSelectorTerms"] == [{}]


def test_pods_of_another_daemonset_of_the_same_name_do_not_stand_for_it():
    stale = ds_pod("dcgm-a", "ip-10-0-1-7", "2026-12-01T08:00:00Z")
    stale["metadata"]["ownerReferences"][0]["uid"] = "uid-of-a-deleted-daemonset"
    (found,) = load(daemon_set(), stale)
    assert found.name == "nvidia-dcgm-exporter"  # the template


def test_daemonset_pods_without_their_daemonset_count_once_per_daemonset():
    found = load(
        ds_pod("dcgm-a", "ip-10-0-1-7", "2026-12-01T08:00:00Z"),
        ds_pod("dcgm-b", "ip-10-0-1-8", "2026-12-01T09:00:00Z"),
        ds_pod("ne-a", "ip-10-0-1-7", "2026-12-01T08:00:00Z", ds="node-exporter"),
    )
    assert [p.name for p in found] == ["ne-a", "dcgm-a"]  # by DaemonSet name


def _sizes() -> list[dict]:
    return [
        node_pool("general", requirements=[]),
        instance_type("m7i.xlarge", cpu="4", memory="16Gi"),
        instance_type("m7i.2xlarge", cpu="8", memory="32Gi"),
    ]


def test_a_daemonsets_requests_are_overhead_of_every_new_nodeclaim():
    app = pod("api-0", cpu="3", memory="1Gi")
    without = run([*_sizes(), app])
    assert without["nodeClaims"][0]["instanceTypes"] == ["m7i.2xlarge", "m7i.xlarge"]
    with_ds = run([*_sizes(), app, daemon_set(cpu="2")])
    assert with_ds["nodeClaims"][0]["instanceTypes"] == ["m7i.2xlarge"]


def test_a_running_daemonset_pod_pinned_to_its_node_is_overhead_too():
    app = pod("api-0", cpu="3", memory="1Gi")
    running = ds_pod("dcgm-a", "ip-10-0-1-7", "2026-12-01T08:00:00Z", cpu="2")
    result = run([*_sizes(), app, copy.deepcopy(running)])
    assert result["nodeClaims"][0]["instanceTypes"] == ["m7i.2xlarge"]
