"""Verified fix suggestions for the scheduler's own causes (CONTRACT section 4): a host port
another pod holds, a volume pinned to a zone the NodePool shuts out, a NodePool ``minValues``
the instance types that fit fall short of, a NodePool ``nodes`` limit used up. Each test applies
the suggested change to the snapshot's documents, simulates again and checks that the pod lands
where the suggestion said."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.suggestions import apply_change, apply_suggestion
from tests.scheduling.k8s import (
    ZONE,
    instance_type,
    node,
    node_pool,
    offering,
    pod,
    pod_result,
    run,
)
from tests.suggestions.test_suggestions import failed, first, placed_after

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "allocator" / "result_schema.json").read_text())
FAMILY = "karpenter.k8s.aws/instance-family"
EXPORTER = "default/node-exporter-x7k2p"


def with_host_port(doc: dict, port: int, *, ip: str | None = None) -> dict:
    entry = {"name": "metrics", "containerPort": port, "hostPort": port}
    if ip:
        entry["hostIP"] = ip
    doc["spec"]["containers"][0]["ports"] = [entry]
    return doc


def exporter_cluster() -> list[dict]:
    """One EKS node where a node exporter holds 9100; the only NodePool allows no instance type
    big enough for the pod, so the node is the only place it can go."""
    name = "ip-10-0-33-7.us-west-2.compute.internal"
    return [
        node(name, instance_type="m7i.4xlarge", cpu="15890m", memory="57Gi"),
        with_host_port(pod("node-exporter-x7k2p", node_name=name, cpu="100m"), 9100),
        with_host_port(pod("train-0", cpu="2", memory="4Gi"), 9100),
    ]


def test_host_port_a_running_pod_holds_gets_change_host_port_naming_port_and_holder():
    docs = exporter_cluster()
    entry = failed(docs)
    assert "hostport" in entry["error"]
    s = first(entry, "change-host-port")
    assert s["change"] == {
        "object": "Pod default/train-0",
        "field": "spec.containers[0].ports[0].hostPort",
        "op": "set",
        "value": 9101,
    }
    assert "9100/TCP" in s["message"] and EXPORTER in s["message"]
    assert s["target"] == {
        "kind": "Node",
        "name": "ip-10-0-33-7.us-west-2.compute.internal",
        "new": False,
    }
    after = placed_after(docs, s)
    assert after["target"]["name"] == "ip-10-0-33-7.us-west-2.compute.internal"


def test_change_host_port_skips_ports_other_pods_hold_and_offers_dropping_it_too():
    docs = exporter_cluster()
    name = "ip-10-0-33-7.us-west-2.compute.internal"
    # 9101 and 9102 are taken too (DCGM exporter, a sidecar): the first free one is 9103.
    docs.insert(2, with_host_port(pod("dcgm-exporter-5pq", node_name=name, cpu="100m"), 9101))
    docs.insert(3, with_host_port(pod("sidecar-9zt", node_name=name, cpu="100m"), 9102))
    entry = failed(docs)
    kinds = [s for s in entry["suggestions"] if s["kind"] == "change-host-port"]
    assert [s["change"]["value"] for s in kinds] == [9103, None]
    assert entry["suggestions"][0]["kind"] == "change-host-port"  # the pod's own change first
    dropped = kinds[1]
    assert dropped["message"].startswith("drop hostPort 9100/TCP")
    after_docs = apply_change(docs, dropped["change"])
    written = [d for d in after_docs if d["metadata"]["name"] == "train-0"][0]
    assert "hostPort" not in written["spec"]["containers"][0]["ports"][0]
    for s in kinds:
        placed_after(docs, s)


def test_host_port_on_one_ip_only_collides_with_the_unspecified_address():
    # The exporter binds 9100 on 10.0.33.7 only; the pod binds 9100 on every address, which
    # collides all the same (Karpenter's HostPortUsage): the suggestion names it and is verified.
    docs = exporter_cluster()
    with_host_port(docs[1], 9100, ip="10.0.33.7")
    entry = failed(docs)
    s = first(entry, "change-host-port")
    assert EXPORTER in s["message"]
    placed_after(docs, s)


def simulate_cli(path: Path, *extra: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "allocator", "simulate", str(path), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_host_ports_example_metrics_pod_gets_a_free_port_through_the_cli(tmp_path):
    path = ROOT / "examples" / "hostports-vllm.yaml"
    key = "inference/vllm-metrics-0"
    result = json.loads(simulate_cli(path, "--json").stdout)
    jsonschema.validate(result, SCHEMA)
    entry = pod_result(result, key)
    assert entry["scheduled"] is False
    s = entry["suggestions"][0]
    assert s["kind"] == "change-host-port"
    assert s["change"] == {
        "object": f"Pod {key}",
        "field": "spec.containers[0].ports[0].hostPort",
        "op": "set",
        "value": 9101,
    }
    assert "inference/node-exporter-q8w4z" in s["message"]
    # The vLLM replicas were placed: they get no suggestions.
    assert all(pod_result(result, f"inference/vllm-{i}")["suggestions"] == [] for i in range(3))
    summary = simulate_cli(path).stdout
    assert "suggestion [change-host-port]: change hostPort 9100/TCP" in summary
    # Applied to the example, the pod is placed where the suggestion said.
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump_all(apply_change(docs, s["change"])))
    again = json.loads(simulate_cli(changed, "--json", "--no-suggestions").stdout)
    placed = pod_result(again, key)
    assert placed["scheduled"], placed["error"]
    assert placed["target"] == s["target"]


# --- volumes -----------------------------------------------------------------------------------


def cache_volume(zone: str) -> list[dict]:
    """An EBS volume in ``zone`` holding the model cache, and the claim bound to it."""
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pvc-7c1e0f52"},
            "spec": {
                "capacity": {"storage": "500Gi"},
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0a1b2c3d4e5f"},
                "storageClassName": "gp3",
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": ZONE, "operator": "In", "values": [zone]}
                                ]
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "model-cache",
                "namespace": "default",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"storageClassName": "gp3", "volumeName": "pvc-7c1e0f52"},
            "status": {"phase": "Bound"},
        },
    ]


def with_volume(doc: dict) -> dict:
    doc["spec"]["volumes"] = [
        {"name": "cache", "persistentVolumeClaim": {"claimName": "model-cache"}}
    ]
    return doc


def zonal_cluster(zone_req: dict) -> list[dict]:
    return [
        *cache_volume("us-west-2c"),
        node_pool("inference", requirements=[*_families("g6e"), zone_req]),
        instance_type(
            "g6e.2xlarge",
            cpu="8",
            memory="64Gi",
            offerings=[
                offering("us-west-2a", 2.24),
                offering("us-west-2b", 2.40),
                offering("us-west-2c", 2.31),
            ],
        ),
        with_volume(pod("train-0", cpu="4", memory="16Gi")),
    ]


def _families(*names: str) -> list[dict]:
    return [{"key": FAMILY, "operator": "In", "values": list(names)}]


def test_volume_in_a_zone_the_nodepool_shuts_out_gets_that_zone_allowed():
    zones = {"key": ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b"]}
    docs = zonal_cluster(zones)
    entry = failed(docs)
    s = first(entry, "nodepool-requirement")
    assert s["change"] == {
        "object": "NodePool inference",
        "field": "spec.template.spec.requirements",
        "op": "set",
        "value": [
            {"key": FAMILY, "operator": "In", "values": ["g6e"]},
            {"key": ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b", "us-west-2c"]},
        ],
    }
    assert "PersistentVolume pvc-7c1e0f52" in s["message"]
    assert "us-west-2c" in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "inference-1", "new": True}
    placed_after(docs, s)
    again = run(apply_change(docs, s["change"]), suggestions=False)
    (claim,) = again["nodeClaims"]
    zone = [r for r in claim["requirements"] if r["key"] == ZONE]
    assert zone == [{"key": ZONE, "operator": "In", "values": ["us-west-2c"]}]


def test_volume_zone_a_nodepool_excludes_with_not_in_is_taken_off_the_list():
    zones = {"key": ZONE, "operator": "NotIn", "values": ["us-west-2c", "us-west-2d"]}
    docs = zonal_cluster(zones)
    s = first(failed(docs), "nodepool-requirement")
    assert s["change"]["value"][1] == {"key": ZONE, "operator": "NotIn", "values": ["us-west-2d"]}
    placed_after(docs, s)


def test_volume_zone_no_instance_type_offers_gets_no_nodepool_zone_suggestion():
    zones = {"key": ZONE, "operator": "In", "values": ["us-west-2a"]}
    docs = zonal_cluster(zones)
    docs[-2]["spec"]["offerings"] = [offering("us-west-2a", 2.24)]  # us-west-2c not offered
    entry = failed(docs)
    assert not [
        s
        for s in entry["suggestions"]
        if s["kind"] == "nodepool-requirement" and "us-west-2c" in str(s["change"])
    ]


# --- minValues and the nodes limit ---------------------------------------------------------------


def min_values_cluster(min_values: int) -> list[dict]:
    """``flexible`` keeps ``min_values`` families on every NodeClaim; the 40-cpu trainer fits
    g6e.12xlarge only among them (g6.12xlarge: 48 cpu but too little memory)."""
    families_req = {
        "key": FAMILY,
        "operator": "In",
        "values": ["g6", "g6e", "p4d"],
        "minValues": min_values,
    }
    return [
        node_pool("flexible", requirements=[families_req]),
        instance_type("g6.12xlarge", cpu="48", memory="192Gi"),
        instance_type("g6e.12xlarge", cpu="48", memory="384Gi"),
        instance_type("p4d.24xlarge", cpu="96", memory="1152Gi"),
        pod("train-0", cpu="40", memory="300Gi"),
    ]


def test_min_values_the_fitting_types_fall_short_of_gets_the_largest_that_places():
    docs = min_values_cluster(3)  # g6e and p4d fit: two families of three
    entry = failed(docs)
    assert "minValues" in entry["error"]
    s = first(entry, "lower-min-values")
    assert s["change"] == {
        "object": "NodePool flexible",
        "field": "spec.template.spec.requirements[0].minValues",
        "op": "set",
        "value": 2,
    }
    assert "from 3 to 2" in s["message"] and FAMILY in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "flexible-1", "new": True}
    placed_after(docs, s)


def test_min_values_with_one_fitting_family_is_lowered_to_one():
    docs = min_values_cluster(2)
    docs[3] = instance_type("p4d.24xlarge", cpu="96", memory="256Gi")  # too little memory now
    s = first(failed(docs), "lower-min-values")
    assert s["change"]["value"] == 1
    placed_after(docs, s)


def nodes_limit_cluster() -> list[dict]:
    """``reserved-h100`` may have two nodes and has two; both are full."""
    docs = [node_pool("reserved-h100", requirements=_families("p5"), limits={"nodes": "2"})]
    docs.append(instance_type("p5.48xlarge"))
    for i in range(2):
        name = f"ip-10-0-1-{17 + i}.us-west-2.compute.internal"
        docs.append(node(name, pool="reserved-h100", cpu="8", memory="64Gi"))
        docs.append(pod(f"trainer-{i}", node_name=name, cpu="8", memory="64Gi"))
    docs.append(pod("train-0", cpu="16", memory="128Gi"))
    return docs


def test_nodes_limit_used_up_gets_it_raised_by_one():
    docs = nodes_limit_cluster()
    entry = failed(docs)
    assert "node limits have been exhausted" in entry["error"]
    s = first(entry, "nodepool-limit")
    assert s["change"] == {
        "object": "NodePool reserved-h100",
        "field": "spec.limits",
        "op": "set",
        "value": {"nodes": "3"},
    }
    assert "nodes from 2 to 3" in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "reserved-h100-1", "new": True}
    placed_after(docs, s)


def test_nodes_limit_with_a_cpu_limit_left_alone_raises_only_nodes():
    docs = nodes_limit_cluster()
    docs[0] = node_pool(
        "reserved-h100", requirements=_families("p5"), limits={"nodes": "2", "cpu": "1000"}
    )
    s = first(failed(docs), "nodepool-limit")
    # Quantities are written in Kubernetes' canonical form; only nodes grows.
    assert s["change"]["value"] == {"cpu": "1k", "nodes": "3"}
    assert "cpu" not in s["message"]
    placed_after(docs, s)


def test_storage_class_allowed_topologies_zone_the_nodepool_shuts_out_gets_it_allowed():
    # An unbound claim (WaitForFirstConsumer) whose StorageClass provisions only in us-west-2c.
    zones = {"key": ZONE, "operator": "In", "values": ["us-west-2a"]}
    docs = zonal_cluster(zones)
    docs[0]["allowedTopologies"] = [
        {"matchLabelExpressions": [{"key": ZONE, "values": ["us-west-2c"]}]}
    ]
    docs[0]["metadata"]["name"] = "gp3-us-west-2c"
    docs[2] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "model-cache", "namespace": "default"},
        "spec": {
            "storageClassName": "gp3-us-west-2c",
            "resources": {"requests": {"storage": "1Ti"}},
        },
        "status": {"phase": "Pending"},
    }
    del docs[1]  # no PersistentVolume yet
    s = first(failed(docs), "nodepool-requirement")
    assert "StorageClass gp3-us-west-2c" in s["message"]
    assert s["change"]["value"][1] == {
        "key": ZONE,
        "operator": "In",
        "values": ["us-west-2a", "us-west-2c"],
    }
    placed_after(docs, s)


# --- generated clusters: every suggestion, applied to the snapshot, places the pod -------------

ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]


def exporter_daemonset(port: int) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-exporter", "namespace": "default", "uid": "ds-uid"},
        "spec": {
            "selector": {"matchLabels": {"app": "node-exporter"}},
            "template": {
                "metadata": {"labels": {"app": "node-exporter"}},
                "spec": {
                    "containers": [
                        {
                            "name": "node-exporter",
                            "image": "quay.io/prometheus/node-exporter:v1.8.2",
                            "ports": [{"containerPort": port, "hostPort": port}],
                            "resources": {"requests": {"cpu": "100m", "memory": "180Mi"}},
                        }
                    ]
                },
            },
        },
    }


@st.composite
def scheduling_clusters(draw) -> list[dict]:
    docs: list[dict] = []
    for i in range(draw(st.integers(0, 2))):
        name = f"ip-10-0-{i}-7.us-west-2.compute.internal"
        docs.append(
            node(name, zone=draw(st.sampled_from(ZONES)), instance_type="g6e.2xlarge", cpu="8")
        )
        port = draw(st.sampled_from([None, 9100, 9101]))
        if port:
            docs.append(with_host_port(pod(f"exporter-{i}", node_name=name, cpu="100m"), port))
    if draw(st.booleans()):
        docs.append(exporter_daemonset(draw(st.sampled_from([9100, 9102]))))
    requirements = [*_families(*draw(st.sampled_from([["g6e"], ["g6e", "g6"]])))]
    if draw(st.booleans()):
        requirements[0]["minValues"] = draw(st.integers(2, 3))
    allowed = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True))
    requirements.append({"key": ZONE, "operator": "In", "values": sorted(allowed)})
    limits = {"nodes": "0"} if draw(st.integers(0, 3)) == 0 else None
    docs.append(node_pool("inference", requirements=requirements, limits=limits))
    offerings = [offering(z, 2.0 + k / 10) for k, z in enumerate(ZONES)]
    docs.append(instance_type("g6e.2xlarge", cpu="8", memory="64Gi", offerings=offerings))
    docs.append(instance_type("g6.2xlarge", cpu="8", memory="32Gi", offerings=offerings))
    train = pod("train-0", cpu="4", memory=draw(st.sampled_from(["16Gi", "48Gi"])))
    port = draw(st.sampled_from([None, 9100, 9101]))
    if port:
        with_host_port(train, port)
    zone = draw(st.sampled_from([None, *ZONES]))
    if zone:
        docs += cache_volume(zone)
        with_volume(train)
    docs.append(train)
    return docs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduling_clusters())
def test_every_suggestion_for_a_scheduling_cause_places_the_pod_where_it_said(docs):
    entry = pod_result(run(docs), "default/train-0")
    if entry["scheduled"]:
        assert entry["suggestions"] == []
        return
    for suggestion in entry["suggestions"]:
        again = pod_result(
            run(apply_suggestion(docs, suggestion), suggestions=False), "default/train-0"
        )
        assert again["scheduled"], (suggestion, again["error"])
        assert again["target"] == suggestion["target"], suggestion


def test_vllm_replica_with_its_nodepool_out_of_nodes_gets_another_port_or_one_more_node():
    # Two vLLM replicas run on the two nodes the NodePool may have, each binding 8000. The
    # third replica finds 8000 taken on both and the NodePool out of nodes: another port puts
    # it next to a replica, one more node gives it its own.
    docs = [
        node_pool("gpu", requirements=_families("g6e"), limits={"nodes": "2"}),
        instance_type("g6e.12xlarge", cpu="48", memory="384Gi"),
    ]
    for i in range(2):
        name = f"ip-10-0-4{i}-7.us-west-2.compute.internal"
        docs.append(node(name, pool="gpu", instance_type="g6e.12xlarge", cpu="47", memory="370Gi"))
        replica = pod(f"vllm-{i}", namespace="inference", node_name=name, cpu="8", memory="48Gi")
        docs.append(with_host_port(replica, 8000))
    docs.append(with_host_port(pod("vllm-2", namespace="inference", cpu="8", memory="48Gi"), 8000))
    entry = failed(docs, "inference/vllm-2")
    port = first(entry, "change-host-port")
    assert port["change"]["value"] == 8001
    assert "inference/vllm-0, inference/vllm-1" in port["message"]
    assert port["target"] == {
        "kind": "Node",
        "name": "ip-10-0-40-7.us-west-2.compute.internal",
        "new": False,
    }
    placed_after(docs, port, "inference/vllm-2")
    limit = first(entry, "nodepool-limit")
    assert limit["change"]["value"] == {"nodes": "3"}
    assert limit["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    placed_after(docs, limit, "inference/vllm-2")
    # Another port is the pod's own change: it comes first.
    kinds = [s["kind"] for s in entry["suggestions"]]
    assert kinds.index("change-host-port") < kinds.index("nodepool-limit")
