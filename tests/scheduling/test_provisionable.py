"""Which pending pods Karpenter provisions for (allocator/scheduling/provisionable.py), read
from pods as kubectl prints them: IsProvisionable, Validate, and the reasons users see."""

from __future__ import annotations

import copy

import yaml

from allocator.model import Pod
from allocator.requirements import LABEL_ZONE
from allocator.scheduling.provisionable import (
    IgnoreCode,
    failed_to_schedule,
    ignore_reason,
    partition,
    provisionable_problem,
    requirement_problems,
    validation_problem,
)
from allocator.scheduling.volumes import Storage
from allocator.snapshot import load_files

UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
}


def raw_pod(name: str = "llama-finetune-0", **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "llama"}],
        },
        "spec": {
            "containers": [
                {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.08-py3", "ports": []}
            ],
            **spec,
        },
        "status": {"phase": "Pending", "conditions": [UNSCHEDULABLE]},
    }


def load(*docs: dict) -> list[Pod]:
    return load_files([("pods.yaml", yaml.safe_dump_all(docs))]).pods


def one(doc: dict) -> Pod:
    (pod,) = load(doc)
    return pod


def reason(doc: dict, storage: Storage | None = None):
    return ignore_reason(one(doc), storage or Storage())


def test_a_pod_kube_scheduler_marked_unschedulable_is_provisioned_for():
    assert reason(raw_pod()) is None


def test_kueues_admission_gate_holds_the_pod():
    doc = raw_pod(schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    # kube-scheduler reports a gated pod as SchedulingGated, never Unschedulable.
    doc["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    ]
    found = reason(doc)
    assert (found.code, found.message) == (
        IgnoreCode.SCHEDULING_GATE,
        "scheduling gate kueue.x-k8s.io/admission",
    )
    doc["spec"]["schedulingGates"].append({"name": "example.com/quota"})
    assert reason(doc).message == "scheduling gates kueue.x-k8s.io/admission, example.com/quota"


def test_a_pod_nominated_by_preemption_is_left_to_kube_scheduler():
    doc = raw_pod()
    doc["status"]["nominatedNodeName"] = "ip-10-0-1-7.us-west-2.compute.internal"
    found = reason(doc)
    assert found.code == IgnoreCode.PREEMPTING
    assert found.message == (
        "nominated to node ip-10-0-1-7.us-west-2.compute.internal (preemption in progress)"
    )


def test_only_a_pod_marked_unschedulable_or_without_status_counts_as_pending():
    no_status = raw_pod()
    del no_status["status"]
    assert failed_to_schedule(one(no_status)) and reason(no_status) is None
    not_seen = raw_pod()
    not_seen["status"] = {"phase": "Pending"}
    found = reason(not_seen)
    assert found.code == IgnoreCode.NOT_UNSCHEDULABLE
    assert found.message == (
        "kube-scheduler has not marked it unschedulable (no PodScheduled condition)"
    )
    other = raw_pod()
    other["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}
    ]
    assert reason(other).message == (
        "kube-scheduler has not marked it unschedulable (PodScheduled is False, reason "
        "SchedulerError)"
    )


def test_daemonset_and_mirror_pods_are_never_provisioned_for():
    ds = raw_pod("nvidia-dcgm-exporter-x7k2p")
    ds["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-dcgm-exporter"}
    ]
    assert provisionable_problem(one(ds)).message == (
        "owned by DaemonSet team-a/nvidia-dcgm-exporter: the DaemonSet controller places it"
    )
    mirror = raw_pod("kube-proxy-ip-10-0-1-7")
    mirror["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "n1"}]
    assert provisionable_problem(one(mirror)).code == IgnoreCode.MIRROR
    # Karpenter matches the owner's API version: an old extensions DaemonSet is not apps/v1.
    old = copy.deepcopy(ds)
    old["metadata"]["ownerReferences"][0]["apiVersion"] = "extensions/v1beta1"
    assert provisionable_problem(one(old)) is None


def _required(*terms: list[dict]) -> dict:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


NOT_KARPENTER = {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}


def test_a_pod_that_refuses_karpenter_nodes_is_ignored():
    found = reason(raw_pod("karpenter-7d9f", affinity=_required([NOT_KARPENTER])))
    assert found.code == IgnoreCode.NOT_ON_KARPENTER
    assert found.message == (
        "configured to not run on a Karpenter provisioned node (requirement "
        "karpenter.sh/nodepool DoesNotExist)"
    )
    # Karpenter's pod requirements start from the first required term only ...
    zone = {"key": LABEL_ZONE, "operator": "In", "values": ["us-west-2a"]}
    assert reason(raw_pod(affinity=_required([zone], [NOT_KARPENTER]))) is None
    # ... and the heaviest preference.
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [zone]}},
                {"weight": 50, "preference": {"matchExpressions": [NOT_KARPENTER]}},
            ]
        }
    }
    assert reason(raw_pod(affinity=preferred)).code == IgnoreCode.NOT_ON_KARPENTER


def test_selecting_a_hostname_or_karpenters_own_labels_is_refused():
    hostname = reason(raw_pod(nodeSelector={"kubernetes.io/hostname": "ip-10-0-1-7"}))
    assert hostname.code == IgnoreCode.UNSUPPORTED_REQUIREMENT
    assert hostname.message.startswith(
        "using label kubernetes.io/hostname is not allowed as it might interfere with the "
        "internal provisioning logic; specify a well known label: [karpenter.sh/capacity-type "
        "karpenter.sh/nodepool kubernetes.io/arch"
    )
    initialized = {"key": "karpenter.sh/initialized", "operator": "In", "values": ["true"]}
    found = reason(raw_pod(affinity=_required([initialized])))
    assert "using label karpenter.sh/initialized is not allowed" in found.message
    # Every required term is checked, not only the first.
    zone = {"key": LABEL_ZONE, "operator": "In", "values": ["us-west-2a"]}
    assert reason(raw_pod(affinity=_required([zone], [initialized]))) is not None
    # Well-known keys, custom keys and deprecated keys normalised to well-known ones pass.
    fine = {
        "karpenter.sh/capacity-type": "spot",
        "failure-domain.beta.kubernetes.io/zone": "us-west-2a",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    }
    assert reason(raw_pod(nodeSelector=fine)) is None


def test_requirement_values_karpenter_cannot_meet():
    assert requirement_problems("karpenter.sh/capacity-type", "In", ["preemptible"]) == [
        "no valid values found in [preemptible] for karpenter.sh/capacity-type, expected one "
        "of: [on-demand reserved spot], got: [preemptible]"
    ]
    # "-1" is no label value either: both problems are reported, as Karpenter combines them.
    assert requirement_problems("example.com/gpu-memory", "Gt", ["-1"])[-1] == (
        "key example.com/gpu-memory with operator Gt must have a single positive integer value"
    )
    assert requirement_problems("example.com/rack", "In", ["rack 7"])[0].startswith(
        "invalid value rack 7 for key example.com/rack"
    )
    assert requirement_problems("nvidia.com/gpu.count", "Gt", ["7"]) == []


def test_match_fields_are_not_supported():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["ip-10-0-1-7"]}
                        ]
                    }
                ]
            }
        }
    }
    found = validation_problem(one(raw_pod(affinity=affinity)), Storage())
    assert found.message == "node selector term with matchFields is not supported"


def test_every_validation_problem_is_reported_together():
    doc = raw_pod(
        nodeSelector={"kubernetes.io/hostname": "ip-10-0-1-7"},
        affinity=_required([NOT_KARPENTER]),
        volumes=[{"name": "cache", "persistentVolumeClaim": {"claimName": "model-cache"}}],
    )
    found = reason(doc)
    assert found.code == IgnoreCode.NOT_ON_KARPENTER
    parts = found.message.split("; ")
    assert parts[0].startswith("configured to not run on a Karpenter provisioned node")
    assert parts[1].startswith("using label kubernetes.io/hostname")
    assert parts[-1] == (
        'getting persistent volume claim, persistentvolumeclaims "model-cache" not found '
        "(volume cache)"
    )
    assert found.volume.claim == "team-a/model-cache"


def test_partition_keeps_the_order_and_reads_the_volumes_of_pods_it_keeps():
    docs = yaml.safe_load_all(
        """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: model-cache, namespace: team-a, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec: {storageClassName: gp3, volumeName: pvc-0a1b}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pvc-0a1b}
spec:
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0a1b}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2b]}]
"""
    )
    cache = [{"name": "cache", "persistentVolumeClaim": {"claimName": "model-cache"}}]
    lost = [{"name": "cache", "persistentVolumeClaim": {"claimName": "deleted-cache"}}]
    serve = raw_pod("vllm-0", volumes=cache)
    gated = raw_pod("vllm-1", schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    # A pod moved off a deleting node is not validated, but its volumes must still be readable.
    moved = raw_pod("vllm-2", nodeName="ip-10-0-9-9", volumes=lost)
    plain = raw_pod("vllm-3")
    snapshot = load_files([("s.yaml", yaml.safe_dump_all([*docs, serve, gated, moved, plain]))])
    split = partition(snapshot.pods, Storage.of(snapshot))
    assert [p.name for p in split.pending] == ["vllm-0", "vllm-3"]
    assert [(i.pod.name, i.reason.code) for i in split.ignored] == [
        ("vllm-1", IgnoreCode.SCHEDULING_GATE),
        ("vllm-2", IgnoreCode.VOLUME_TOPOLOGY),
    ]
    assert split.ignored[1].reason.message.startswith(
        "failed getting volume topology requirements, discovering persistent volume claim"
    )
    assert list(split.volume_topology) == ["team-a/vllm-0"]
    assert split.ignored[0].to_json() == {
        "pod": "team-a/vllm-1",
        "reason": "scheduling gate kueue.x-k8s.io/admission",
        "code": "scheduling-gate",
    }
