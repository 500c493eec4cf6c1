"""Karpenter pkg/controllers/provisioning/scheduling/suite_test.go, "VolumeUsage", title by title,
through the whole simulation. The suite's catalog is one instance type with 1024 CPUs and 1024
pods and the NodePool has no limits. Karpenter's tests provision a first pod, then register the
node's CSINode and provision again; here the node of the first loop is in the snapshot with its
pod and CSINode, and one loop runs.

Ported: 17 titles (DescribeTables one test per entry). Left out (5):
- "should not launch nodes for pod with storageClass that uses an unsupported provisioner",
  "... with bound persistentVolume that uses an unsupported provisioner", "... with storageClass
  that uses an unsupported topology key": they configure Karpenter's UnsupportedProvisioners /
  UnsupportedTopologyKeys, which cloud providers set and this simulator has no option for
  (both are empty, as in Karpenter's core).
- "should schedule pods using a PV with multiple zones", "should schedule pods using a
  StorageClass with multiple zones in AllowedTopologies": they need required pod anti-affinity
  on the zone, which is not on this branch.
The fake provider's label ``special`` is well known there; here the NodePool declares it.
"""

from __future__ import annotations

import pytest

from tests.scheduling.karpenter.kit import (
    CSI_PROVIDER,
    SPECIAL,
    ZONE,
    csi_node,
    fake_instance_types,
    instance_type,
    launched_node,
    node_pool,
    pod_doc,
    provision,
    pv,
    pvc,
    storage_class,
    unschedulable_pod,
)

WFFC = "WaitForFirstConsumer"
BIG = instance_type("instance-type", cpu="1024", pods="1024")
POOL = node_pool(limits={"cpu": "100000"})
EBS = "ebs.csi.aws.com"


def running(name: str, **options) -> dict:
    """The first loop's pod, bound to the node it got."""
    return pod_doc(name, node_name="node-1", **options)


def first_node() -> list[dict]:
    return [launched_node("node-1", "instance-type", cpu="1023900m", memory="4086Mi", pods="1024")]


def test_should_launch_multiple_nodes_if_required_due_to_volume_limits():
    sc = storage_class(
        "my-storage-class", provisioner=CSI_PROVIDER, mode=WFFC, zones=("us-west-2a",)
    )
    claims, pods = [], []
    for i in range(6):
        a, b = (
            pvc(f"my-claim-a-{i}", storage_class=sc["metadata"]["name"]),
            pvc(f"my-claim-b-{i}", storage_class=sc["metadata"]["name"]),
        )
        claims += [a, b]
        pods.append(unschedulable_pod(f"pod-{i}", pvcs=(f"my-claim-a-{i}", f"my-claim-b-{i}")))
    result = provision(
        POOL, BIG, *first_node(), running("initial"), csi_node("node-1"), sc, *claims, *pods
    )
    # The node can attach 10 volumes: five pods; the sixth needs a new node.
    on_node = [p for p in pods if result.target(p) == "node-1"]
    assert len(on_node) == 5
    assert len(result.new_node_claims) == 1


def test_should_launch_a_single_node_if_all_pods_use_the_same_pvc():
    sc = storage_class("my-storage-class", provisioner=CSI_PROVIDER, zones=("us-west-2a",))
    volume = pv("my-volume", zones=("us-west-2a",))
    claim = pvc("my-claim", storage_class="my-storage-class", volume="my-volume")
    pods = [unschedulable_pod(f"pod-{i}", pvcs=("my-claim",)) for i in range(100)]
    result = provision(
        POOL, BIG, *first_node(), running("initial"), csi_node("node-1"), sc, volume, claim, *pods
    )
    assert all(result.target(p) == "node-1" for p in pods)
    assert result.new_node_claims == []


def test_should_not_fail_for_nfs_volumes():
    volume = pv("my-volume", storage_class="nfs", zones=("us-west-2a",), nfs=True)
    claim = pvc("my-claim", storage_class="", volume="my-volume")
    pods = [unschedulable_pod(f"pod-{i}", pvcs=("my-claim", "my-claim")) for i in range(5)]
    result = provision(POOL, BIG, *first_node(), running("initial"), volume, claim, *pods)
    assert result.new_node_claims == []
    assert all(result.target(p) == "node-1" for p in pods)


@pytest.mark.parametrize("kind", ["local", "host_path"], ids=["local volumes", "hostpath volumes"])
def test_should_preserve_unconstrained_pv_alternatives_after_ignoring_hostname_affinity(kind):
    terms = [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["existing-host"]}
            ]
        },
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["invalid-zone"]}]},
    ]
    volume = pv("hostname-or-zone-pv", terms=terms, **{kind: True})
    claim = pvc("hostname-or-zone-pvc", volume="hostname-or-zone-pv")
    pod = unschedulable_pod("hostname-or-zone-pod", pvcs=("hostname-or-zone-pvc",))
    assert provision(POOL, BIG, volume, claim, pod).scheduled(pod)


def test_should_schedule_pods_when_a_valid_multi_volume_topology_alternative_remains_after_pruning_disjoint_branches():
    sc_a = storage_class(
        "pruned-overlap-a", mode=WFFC, topologies=[{SPECIAL: ["required"]}, {SPECIAL: ["optional"]}]
    )
    sc_b = storage_class(
        "pruned-overlap-b",
        mode=WFFC,
        topologies=[
            {ZONE: ["us-west-2a"], SPECIAL: ["optional"]},
            {ZONE: ["us-west-2b"], SPECIAL: ["required"]},
        ],
    )
    claims = [
        pvc("pruned-overlap-pvc-a", storage_class="pruned-overlap-a"),
        pvc("pruned-overlap-pvc-b", storage_class="pruned-overlap-b"),
    ]
    pod = unschedulable_pod(
        "pruned-overlap-pod", pvcs=("pruned-overlap-pvc-a", "pruned-overlap-pvc-b")
    )
    pool = node_pool(requirements=[{"key": SPECIAL, "operator": "Exists"}])
    result = provision(pool, *fake_instance_types(5), sc_a, sc_b, *claims, pod)
    assert result.values(pod, ZONE) == {"us-west-2a"}
    assert result.values(pod, SPECIAL) == {"optional"}


def _ephemeral_pair(sc_docs: list[dict], template_class: str | None, limits: dict[str, int]):
    """A first pod with an ephemeral volume running on node-1 (whose CSINode states ``limits``),
    and a second such pod pending; both claims created by the ephemeral volume controller."""
    initial = running("initial", ephemeral=(template_class,))
    pod = unschedulable_pod("second", ephemeral=(template_class,))
    claims = [
        pvc("initial-eph-0", storage_class=template_class),
        pvc("second-eph-0", storage_class=template_class),
    ]
    return provision(
        POOL, BIG, *first_node(), csi_node("node-1", limits), *sc_docs, initial, *claims, pod
    ), pod


def test_should_launch_nodes_for_pods_with_ephemeral_volume_using_the_specified_storage_class_name():
    sc = storage_class(
        "my-storage-class", provisioner=CSI_PROVIDER, mode=WFFC, zones=("us-west-2a",)
    )
    other = storage_class(
        "default-storage-class",
        provisioner="other-provider",
        mode=WFFC,
        zones=("us-west-2a",),
        default=True,
    )
    result, pod = _ephemeral_pair(
        [sc, other], "my-storage-class", {CSI_PROVIDER: 1, "other-provider": 10}
    )
    assert result.target(pod) != "node-1"


def test_should_launch_nodes_for_pods_with_ephemeral_volume_using_a_default_storage_class():
    sc = storage_class(
        "default-storage-class",
        provisioner=CSI_PROVIDER,
        mode=WFFC,
        zones=("us-west-2a",),
        default=True,
    )
    result, pod = _ephemeral_pair([sc], None, {CSI_PROVIDER: 1})
    assert result.target(pod) != "node-1"


def test_should_launch_nodes_for_pods_with_ephemeral_volume_using_the_newest_storage_class():
    older = storage_class(
        "default-storage-class",
        provisioner="other-provider",
        mode=WFFC,
        zones=("us-west-2a",),
        default=True,
        created="2026-12-01T09:00:00Z",
    )
    newer = storage_class(
        "newer-default-storage-class",
        provisioner=CSI_PROVIDER,
        mode=WFFC,
        zones=("us-west-2a",),
        default=True,
        created="2026-12-01T09:00:05Z",
    )
    result, pod = _ephemeral_pair([older, newer], None, {CSI_PROVIDER: 1})
    assert result.target(pod) != "node-1"


def _not_launched(*docs, pod) -> None:
    result = provision(POOL, BIG, *docs, pod)
    assert not result.scheduled(pod)
    assert result.new_node_claims == []
    assert result.ignored(pod)


def test_should_not_launch_nodes_for_pod_with_unbound_volume_for_volumebindingmode_immediate():
    sc = storage_class("default-storage-class", provisioner="other-provider", mode="Immediate")
    claim = pvc("tmp-ephemeral", storage_class="default-storage-class")
    _not_launched(sc, claim, pod=unschedulable_pod(pvcs=("tmp-ephemeral",)))


def test_should_not_launch_nodes_for_pod_with_deleting_persistentvolumeclaim():
    sc = storage_class("default-storage-class", provisioner="other-provider", mode=WFFC)
    claim = pvc("tmp-ephemeral", storage_class="default-storage-class")
    claim["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    _not_launched(sc, claim, pod=unschedulable_pod(pvcs=("tmp-ephemeral",)))


def test_should_not_launch_nodes_for_pod_with_bound_persistentvolume_that_is_marked_for_deletion():
    volume = pv("pv-deleting", driver="other-provider")
    volume["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    pod = unschedulable_pod(ephemeral=(None,))
    claim = pvc(f"{pod['metadata']['name']}-eph-0", volume="pv-deleting")
    _not_launched(volume, claim, pod=pod)


def test_should_not_launch_nodes_for_pod_with_lost_persistentvolumeclaim():
    sc = storage_class("default-storage-class", provisioner="other-provider", mode=WFFC)
    claim = pvc("tmp-ephemeral", storage_class="default-storage-class")
    claim["status"] = {"phase": "Lost"}
    _not_launched(sc, claim, pod=unschedulable_pod(pvcs=("tmp-ephemeral",)))


@pytest.mark.parametrize(
    "annotated",
    [False, True],
    ids=[
        "when pv.kubernetes.io/bind-completed is missing",
        "when pv.kubernetes.io/bind-completed is present",
    ],
)
def test_should_handle_pods_with_pvcs_with_defined_volumename(annotated):
    sc = storage_class("default-storage-class", provisioner="other-provider", mode=WFFC)
    volume = pv("pv-1", driver="other-provider")
    claim = pvc("tmp-ephemeral", storage_class="default-storage-class", volume="pv-1")
    if not annotated:
        del claim["metadata"]["annotations"]
    pod = unschedulable_pod(pvcs=("tmp-ephemeral",))
    result = provision(POOL, BIG, sc, volume, claim, pod)
    assert result.scheduled(pod) is annotated


@pytest.mark.parametrize(
    "class_name",
    ["non-existent", ""],
    ids=["non-existent storage class", "explicitly disabled storage class (empty string)"],
)
def test_should_launch_nodes_for_pods_with_ephemeral_volume_without_a_storage_class_when_the_pvc_is_bound(
    class_name,
):
    pod = unschedulable_pod(ephemeral=(class_name,))
    claim = pvc(f"{pod['metadata']['name']}-eph-0", storage_class=class_name, volume="test-pv")
    result = provision(POOL, BIG, claim, pv("test-pv"), pod)
    assert len(result.new_node_claims) == 1 and result.scheduled(pod)


@pytest.mark.parametrize(
    "class_name",
    ["non-existent", ""],
    ids=["non-existent storage class", "explicitly disabled storage class (empty string)"],
)
def test_should_not_launch_nodes_for_pods_with_ephemeral_volume_without_a_storage_class_when_the_pvc_is_unbound(
    class_name,
):
    # The ephemeral volume controller has not created the claim: nothing to read.
    _not_launched(pod=unschedulable_pod(ephemeral=(class_name,)))


def test_should_launch_nodes_for_pods_with_non_dynamic_pvc_using_a_migrated_pvc_pv():
    sc = storage_class(
        "in-tree-storage-class",
        provisioner="kubernetes.io/aws-ebs",
        mode=WFFC,
        zones=("us-west-2a",),
        default=True,
    )
    first = pvc("first", storage_class="in-tree-storage-class")
    volume = pv("my-volume", zones=("us-west-2a",), aws_in_tree=True)
    second = pvc("second", storage_class="in-tree-storage-class")
    pod = unschedulable_pod(pvcs=("second",))
    result = provision(
        POOL,
        BIG,
        *first_node(),
        running("initial", pvcs=("first",)),
        csi_node("node-1", {EBS: 1}),
        sc,
        first,
        volume,
        second,
        pod,
    )
    assert result.target(pod) != "node-1"


def test_should_launch_nodes_for_pods_with_ephemeral_volume_using_a_migrated_pvc_pv():
    sc = storage_class(
        "in-tree-storage-class",
        provisioner="kubernetes.io/aws-ebs",
        mode=WFFC,
        zones=("us-west-2a",),
        default=True,
    )
    result, pod = _ephemeral_pair([sc], "in-tree-storage-class", {EBS: 1})
    assert result.target(pod) != "node-1"
