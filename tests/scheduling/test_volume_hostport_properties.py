"""Host ports and volumes, on random clusters: the scheduler's shortcuts (refusing by cached
funnels and device counts, NodeClaim refusals found without their words, pods of one shape
replayed) change no decision and no word of the result; and the result keeps Karpenter's rules
whatever the shortcuts did (no two pods of a node share a host port, no pod lands outside the
zone its volume pins, no node takes more claims than its CSINode allows).

Random clusters: existing GPU nodes in us-west-2a or us-west-2b, some running a node exporter
on host port 9100, some with a CSINode allowing 1 or 2 EBS volumes; a NodePool over one GPU
instance type offered in both zones; pending pods asking for a GPU or not, with host port 8000
or 9100 or none, and a claim bound to an EBS volume in one zone or none.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.scheduling.tuning import Tuning
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from tests.contract.conftest import (
    claim_template,
    device_class,
    gpu_devices,
    instance_type,
    namespace,
    node,
    nodepool,
    pod,
    resource_slice,
    template_slice,
)

ZONES = ("us-west-2a", "us-west-2b")
ZONE = "topology.kubernetes.io/zone"
EBS = "ebs.csi.aws.com"

node_spec = st.tuples(
    st.sampled_from(ZONES),
    st.integers(1, 2),  # GPUs
    st.booleans(),  # a node exporter on 9100
    st.none() | st.integers(1, 2),  # the CSINode's EBS limit
)
pod_spec = st.tuples(
    st.booleans(),  # a GPU
    st.sampled_from([None, 8000, 9100]),  # host port
    st.none() | st.sampled_from(ZONES),  # a claim bound to a volume in that zone
)


def _with_ports(doc: dict, port: int | None) -> dict:
    if port:
        doc["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return doc


def _volume(name: str, zone: str, node_name: str | None = None) -> list[dict]:
    """An EBS volume in ``zone`` and the claim bound to it."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pv-{name}"},
        "spec": {
            "csi": {"driver": EBS, "volumeHandle": f"vol-{name}"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                    ]
                }
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"storageClassName": "gp3", "volumeName": f"pv-{name}"},
    }
    return [pv, pvc]


def cluster(nodes, pods) -> list[dict]:
    docs = [namespace("default"), device_class(), claim_template("one-gpu")]
    for i, (zone, count, exporter, limit) in enumerate(nodes):
        name = f"ip-10-0-{i}-7.us-west-2.compute.internal"
        docs.append(node(name, cpu="32", memory="256Gi", labels={ZONE: zone}))
        docs.append(resource_slice(name, gpu_devices(count)))
        if exporter:
            docs.append(_with_ports(pod(f"node-exporter-{i}", node_name=name, cpu="100m"), 9100))
        if limit is not None:
            docs.append(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "CSINode",
                    "metadata": {"name": name},
                    "spec": {
                        "drivers": [
                            {"name": EBS, "nodeID": f"i-{i}", "allocatable": {"count": limit}}
                        ]
                    },
                }
            )
    docs.append(nodepool("gpu"))
    offerings = [
        {"zone": z, "capacityType": "on-demand", "price": 2.0 + k, "available": True}
        for k, z in enumerate(ZONES)
    ]
    docs.append(
        instance_type(
            "g6e.2xlarge",
            cpu="8",
            memory="64Gi",
            offerings=offerings,
            slices=[template_slice("g6e-gpus", gpu_devices(1))],
        )
    )
    for j, (gpu, port, volume_zone) in enumerate(pods):
        claims = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}] if gpu else None
        doc = _with_ports(
            pod(f"vllm-{j}", cpu="2", created=f"2026-12-01T10:00:{j:02d}Z", claims=claims), port
        )
        if volume_zone:
            docs.extend(_volume(f"cache-{j}", volume_zone))
            doc["spec"]["volumes"] = [
                {"name": "cache", "persistentVolumeClaim": {"claimName": f"cache-{j}"}}
            ]
        docs.append(doc)
    return docs


def run(docs: list[dict], shortcuts: bool) -> dict:
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    tuning = Tuning(funnel_refusal=shortcuts, nodeclaim_caches=shortcuts)
    result = simulate(snapshot, SimulationOptions(suggestions=False), tuning=tuning).result
    result["stats"].pop("seconds")
    return result


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(node_spec, max_size=3), pods=st.lists(pod_spec, min_size=1, max_size=10))
def test_shortcuts_change_nothing_and_the_rules_hold(nodes, pods) -> None:
    docs = cluster(nodes, pods)
    fast = run(docs, True)
    assert fast == run(docs, False)

    node_zone = {f"ip-10-0-{i}-7.us-west-2.compute.internal": n[0] for i, n in enumerate(nodes)}
    exporters = {f"ip-10-0-{i}-7.us-west-2.compute.internal" for i, n in enumerate(nodes) if n[2]}
    limits = {
        f"ip-10-0-{i}-7.us-west-2.compute.internal": n[3] for i, n in enumerate(nodes) if n[3]
    }
    claim_zones = {}
    for nc in fast["nodeClaims"]:
        zone = next((r["values"] for r in nc["requirements"] if r["key"] == ZONE), list(ZONES))
        claim_zones[nc["name"]] = set(zone)
    ports: dict[str, list[int]] = {}
    volumes: dict[str, int] = {}
    for entry in fast["pods"]:
        if not entry["scheduled"]:
            continue
        j = int(entry["pod"].rsplit("-", 1)[1])
        _, port, volume_zone = pods[j]
        target = entry["target"]["name"]
        if port:
            ports.setdefault(target, []).append(port)
        if volume_zone:
            volumes[target] = volumes.get(target, 0) + 1
            zones = {node_zone[target]} if target in node_zone else claim_zones[target]
            assert zones == {volume_zone}, (entry["pod"], target, zones)
    for target, held in ports.items():
        if target in exporters:
            held = [*held, 9100]
        assert len(held) == len(set(held)), (target, held)
    for target, count in volumes.items():
        assert count <= limits.get(target, count), (target, count)
