"""Karpenter pkg/controllers/provisioning/suite_test.go, "Provisioning" / "Volume Topology
Requirements", title by title, through the whole simulation (allocator/scheduling/volumes.py,
provisionable.py and the scheduler). The StorageClass of the BeforeEach allows us-west-2b and
us-west-2c and binds WaitForFirstConsumer.

Ported: all 20 titles (the two DescribeTables as one test per entry). Where Karpenter's test
provisions twice (an invalid pod, then a valid one), one run holds both pods: the invalid pod
is ignored either way and takes nothing from the valid one. "ExpectMetricGaugeValue(
IgnoredPodCount, 1)" reads here as the pod listed in ``ignoredPods``.
"""

from __future__ import annotations

import pytest

from tests.scheduling.karpenter.kit import (
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    default_instance_types,
    node_pool,
    provision,
    pv,
    pvc,
    storage_class,
    unschedulable_pod,
)

WFFC = "WaitForFirstConsumer"


@pytest.fixture
def cluster() -> list[dict]:
    return [node_pool(), *default_instance_types()]


@pytest.fixture
def zonal_class() -> dict:
    return storage_class("zonal", zones=("us-west-2b", "us-west-2c"), mode=WFFC)


def zone_in(*zones: str) -> list[dict]:
    return [{"key": ZONE, "operator": "In", "values": list(zones)}]


def ephemeral_claim(pod: dict, **kw) -> dict:
    """The claim the ephemeral volume controller creates for the pod's first ephemeral volume."""
    return pvc(f"{pod['metadata']['name']}-eph-0", **kw)


def test_should_not_schedule_if_invalid_pvc(cluster):
    pod = unschedulable_pod(pvcs=("invalid",))
    result = provision(*cluster, pod)
    assert not result.scheduled(pod)
    assert 'persistentvolumeclaims "invalid" not found' in result.ignored(pod)
    assert len(result.result["ignoredPods"]) == 1


def test_should_schedule_with_an_empty_storage_class_if_the_pvc_is_bound(cluster):
    claim = pvc(storage_class="", volume="test-volume")
    pod = unschedulable_pod(pvcs=(claim["metadata"]["name"],))
    result = provision(*cluster, claim, pv("test-volume"), pod)
    assert result.scheduled(pod)


def test_should_not_schedule_with_an_empty_storage_class_if_the_pvc_is_not_bound(cluster):
    claim = pvc(storage_class="")
    pod = unschedulable_pod(pvcs=(claim["metadata"]["name"],))
    result = provision(*cluster, claim, pod)
    assert not result.scheduled(pod)
    assert "unbound pvc must define a storage class" in result.ignored(pod)


def test_should_schedule_with_a_missing_storage_class_if_the_pvc_is_bound(cluster):
    claim = pvc(storage_class="missing-storage-class", volume="test-volume")
    volume = pv("test-volume", storage_class="missing-storage-class")
    pod = unschedulable_pod(pvcs=(claim["metadata"]["name"],))
    assert provision(*cluster, claim, volume, pod).scheduled(pod)


def test_should_not_schedule_with_a_missing_storage_class_if_the_pvc_is_not_bound(cluster):
    claim = pvc(storage_class="missing-storage-class")
    pod = unschedulable_pod(pvcs=(claim["metadata"]["name"],))
    result = provision(*cluster, claim, pod)
    assert not result.scheduled(pod)
    assert "failed to get storage class" in result.ignored(pod)


def _invalid_then_valid(cluster, *objects, claim_name):
    invalid = unschedulable_pod(pvcs=(claim_name,))
    valid = unschedulable_pod()
    result = provision(*cluster, *objects, invalid, valid)
    assert not result.scheduled(invalid) and result.ignored(invalid)
    assert result.scheduled(valid)


def test_should_schedule_valid_pods_when_a_pod_with_an_invalid_pvc_is_encountered_pvc(cluster):
    _invalid_then_valid(cluster, claim_name="invalid")


def test_should_schedule_valid_pods_when_a_pod_with_an_invalid_pvc_is_encountered_storage_class(
    cluster,
):
    claim = pvc(storage_class="invalid-storage-class")
    _invalid_then_valid(cluster, claim, claim_name=claim["metadata"]["name"])


def test_should_schedule_valid_pods_when_a_pod_with_an_invalid_pvc_is_encountered_volume_name(
    cluster,
):
    claim = pvc(volume="invalid-volume-name")
    _invalid_then_valid(cluster, claim, claim_name=claim["metadata"]["name"])


def test_should_schedule_to_storage_class_zones_if_volume_does_not_exist(cluster, zonal_class):
    claim = pvc(storage_class="zonal")
    pod = unschedulable_pod(
        pvcs=(claim["metadata"]["name"],), node_requirements=zone_in("us-west-2a", "us-west-2c")
    )
    result = provision(*cluster, zonal_class, claim, pod)
    assert result.values(pod, ZONE) == {"us-west-2c"}


def test_should_schedule_to_storage_class_zones_if_volume_does_not_exist_ephemeral_volume(
    cluster, zonal_class
):
    pod = unschedulable_pod(
        ephemeral=("zonal",), node_requirements=zone_in("us-west-2a", "us-west-2c")
    )
    result = provision(*cluster, zonal_class, ephemeral_claim(pod, storage_class="zonal"), pod)
    assert result.values(pod, ZONE) == {"us-west-2c"}


def test_should_not_schedule_if_storage_class_zones_are_incompatible(cluster, zonal_class):
    claim = pvc(storage_class="zonal")
    pod = unschedulable_pod(
        pvcs=(claim["metadata"]["name"],), node_requirements=zone_in("us-west-2a")
    )
    result = provision(*cluster, zonal_class, claim, pod)
    assert not result.scheduled(pod)
    assert "incompatible volume requirements" in result.error(pod)


def test_should_not_schedule_if_storage_class_zones_are_incompatible_ephemeral_volume(
    cluster, zonal_class
):
    pod = unschedulable_pod(ephemeral=("zonal",), node_requirements=zone_in("us-west-2a"))
    result = provision(*cluster, zonal_class, ephemeral_claim(pod, storage_class="zonal"), pod)
    assert not result.scheduled(pod)


def test_should_schedule_to_volume_zones_if_volume_already_bound(cluster, zonal_class):
    volume = pv(zones=("us-west-2c",))
    claim = pvc(volume=volume["metadata"]["name"], storage_class="zonal")
    pod = unschedulable_pod(pvcs=(claim["metadata"]["name"],))
    result = provision(*cluster, zonal_class, claim, volume, pod)
    assert result.values(pod, ZONE) == {"us-west-2c"}


def test_should_schedule_to_volume_zones_if_volume_already_bound_ephemeral_volume(
    cluster, zonal_class
):
    volume = pv(zones=("us-west-2c",))
    pod = unschedulable_pod(ephemeral=("zonal",))
    claim = ephemeral_claim(pod, volume=volume["metadata"]["name"], storage_class="zonal")
    result = provision(*cluster, zonal_class, claim, volume, pod)
    assert result.values(pod, ZONE) == {"us-west-2c"}


HOSTNAME_TERMS = [
    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["ip-random"]}]}
]
LOCAL_PATH = storage_class("local-path", provisioner="kubernetes.io/no-provisioner")


@pytest.mark.parametrize("kind", ["local", "host_path"], ids=["local volumes", "hostpath volumes"])
def test_should_ignore_hostname_affinity_scheduling_when_using_local_path_volumes(cluster, kind):
    volume = pv(terms=HOSTNAME_TERMS, **{kind: True})
    claim = pvc(volume=volume["metadata"]["name"], storage_class="local-path")
    pod = unschedulable_pod(pvcs=(claim["metadata"]["name"],))
    assert provision(*cluster, LOCAL_PATH, claim, volume, pod).scheduled(pod)


@pytest.mark.parametrize("kind", ["local", "host_path"], ids=["local volumes", "hostpath volumes"])
def test_should_ignore_hostname_affinity_scheduling_when_using_local_path_volumes_ephemeral_volume(
    cluster, kind
):
    volume = pv(terms=HOSTNAME_TERMS, **{kind: True})
    pod = unschedulable_pod(ephemeral=("local-path",))
    claim = ephemeral_claim(pod, volume=volume["metadata"]["name"], storage_class="local-path")
    assert provision(*cluster, LOCAL_PATH, claim, volume, pod).scheduled(pod)


def test_should_not_ignore_hostname_affinity_when_using_non_local_path_volumes(
    cluster, zonal_class
):
    volume = pv(terms=HOSTNAME_TERMS)
    claim = pvc(volume=volume["metadata"]["name"], storage_class="zonal")
    pod = unschedulable_pod(pvcs=(claim["metadata"]["name"],))
    result = provision(*cluster, zonal_class, claim, volume, pod)
    assert not result.scheduled(pod)


def test_should_not_schedule_if_volume_zones_are_incompatible(cluster, zonal_class):
    volume = pv(zones=("us-west-2c",))
    claim = pvc(volume=volume["metadata"]["name"], storage_class="zonal")
    pod = unschedulable_pod(
        pvcs=(claim["metadata"]["name"],), node_requirements=zone_in("us-west-2a")
    )
    result = provision(*cluster, zonal_class, claim, volume, pod)
    assert not result.scheduled(pod)
    # The refusal names the volume that pins the zone.
    assert volume["metadata"]["name"] in result.error(pod)


def test_should_not_schedule_if_volume_zones_are_incompatible_ephemeral_volume(
    cluster, zonal_class
):
    volume = pv(zones=("us-west-2c",))
    pod = unschedulable_pod(ephemeral=("zonal",), node_requirements=zone_in("us-west-2a"))
    claim = ephemeral_claim(pod, volume=volume["metadata"]["name"], storage_class="zonal")
    result = provision(*cluster, zonal_class, claim, volume, pod)
    assert not result.scheduled(pod)


def test_should_not_relax_an_added_volume_topology_zone_node_selector_away(cluster, zonal_class):
    volume = pv(zones=("us-west-2c",))
    claim = pvc(volume=volume["metadata"]["name"], storage_class="zonal")
    pod = unschedulable_pod(
        pvcs=(claim["metadata"]["name"],),
        node_requirements=[
            {"key": "example.com/label", "operator": "In", "values": ["unsupported"]}
        ],
    )
    # A second term ORed with the first: the volume's zone holds whichever term is kept.
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ].append(
        {"matchExpressions": [{"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]}
    )
    result = provision(*cluster, zonal_class, claim, volume, pod)
    assert result.values(pod, ZONE) == {"us-west-2c"}
