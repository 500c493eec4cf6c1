"""Pairing a cluster listing with the catalog: which region, which instance types, MIG or not."""

from __future__ import annotations

import pytest

from allocator.catalog.pairing import (
    cluster_publishes_mig,
    find_region,
    pair_with_cluster,
    region_of_zone,
)
from tests.scheduling.k8s import families, node, node_claim, node_pool, resource_slice


def _names(pairing) -> set[str]:
    return {d["metadata"]["name"] for d in pairing.instance_types}


@pytest.mark.parametrize(
    ("zone", "region"),
    [
        ("us-west-2a", "us-west-2"),
        ("us-gov-west-1b", "us-gov-west-1"),
        ("ap-northeast-1d", "ap-northeast-1"),
        ("usw2-az1", None),
        ("", None),
    ],
)
def test_region_of_zone(zone, region):
    assert region_of_zone(zone) == region


def test_nodes_of_a_p5_cluster_bring_their_family_and_the_nodepools_types(cluster_docs):
    docs = [d for d in cluster_docs if d["kind"] != "InstanceType"]
    pairing = pair_with_cluster(docs)
    assert pairing.region == "us-west-2"
    # The NodePool allows p5.48xlarge only; the nodes bring the p5 family.
    assert _names(pairing) == {"p5.48xlarge", "p5.4xlarge"}
    assert pairing.mig is False  # the cluster's GPU slices publish whole GPUs
    assert (
        "2 instance types from the dra-web AWS catalog for us-west-2 (p5; full GPUs)"
        in (pairing.notes[0])
    )


def test_nodepool_requirements_select_by_karpenters_labels():
    pools = [
        node_pool("inference", requirements=families("g6e", "g6")),
        node_pool(
            "training",
            requirements=[
                {
                    "key": "karpenter.k8s.aws/instance-gpu-name",
                    "operator": "In",
                    "values": ["h100"],
                },
                {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["4"]},
            ],
        ),
    ]
    pairing = pair_with_cluster(
        [*pools, node("ip-10-0-0-1", zone="eu-west-1b", instance_type="m5.large")]
    )
    assert pairing.region == "eu-west-1"
    names = _names(pairing)
    assert "p5.48xlarge" in names and "p5.4xlarge" not in names
    assert {n.split(".")[0] for n in names} == {"g6", "g6e", "p5"}


def test_an_unrestricted_nodepool_allows_the_whole_catalog_and_region_comes_from_its_zones():
    pool = node_pool(
        "any",
        requirements=[
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["ap-south-1a"]}
        ],
    )
    pairing = pair_with_cluster([pool], region=None)
    assert pairing.region == "ap-south-1"
    assert len(pairing.instance_types) == 66


def test_an_explicit_region_and_mig_mode_win():
    pairing = pair_with_cluster(
        [node_pool("gpu", requirements=families("p4d"))], region="us-east-2", mig=True
    )
    (doc,) = pairing.instance_types
    assert pairing.region == "us-east-2" and pairing.mig
    assert len(doc["spec"]["dynamicResources"]["resourceSliceTemplates"]) == 8


def test_an_unregistered_nodeclaim_brings_its_family():
    pairing = pair_with_cluster(
        [
            node_pool("neuron", requirements=families("inf2")),
            node_claim("neuron-abc12", pool="neuron", instance_type="trn1.32xlarge"),
        ]
    )
    assert {n.split(".")[0] for n in _names(pairing)} == {"inf2", "trn1"}


@pytest.mark.parametrize(
    ("items", "note"),
    [
        ([node("ip-10-0-0-1")], "no Karpenter NodePool"),
        (
            [
                {
                    **node_pool("kwok"),
                    "spec": {
                        "template": {
                            "spec": {
                                "nodeClassRef": {
                                    "group": "karpenter.kwok.sh",
                                    "kind": "KWOKNodeClass",
                                    "name": "default",
                                }
                            }
                        }
                    },
                }
            ],
            "no NodePool uses an AWS EC2NodeClass",
        ),
        ([node_pool("gpu")], "the cluster's region is unknown"),
        (
            [node_pool("gpu"), node("n", zone="xx-moon-1a")],
            "region xx-moon-1 is not in the AWS catalog",
        ),
        (
            [node_pool("cpu", requirements=families("m7i")), node("n", instance_type="m7i.large")],
            "no AWS NodePool allows an instance type of the catalog",
        ),
    ],
)
def test_nothing_is_added_and_the_reason_is_said(items, note):
    pairing = pair_with_cluster(items)
    assert pairing.instance_types == []
    assert note in pairing.notes[0]


def test_mig_is_detected_from_the_clusters_gpu_slices():
    whole = resource_slice("n-gpu", node="n", devices=[{"name": "gpu-0"}])
    assert cluster_publishes_mig([whole]) is False
    partitioned = resource_slice(
        "n-gpu",
        node="n",
        devices=[{"name": "gpu-0-mig-1g10gb-19-0", "attributes": {"type": {"string": "mig"}}}],
    )
    assert cluster_publishes_mig([partitioned]) is True
    other = resource_slice("n-nic", driver="nic.example.com", node="n", devices=[{"name": "nic-0"}])
    other["spec"]["sharedCounters"] = [{"name": "bw", "counters": {"gbps": {"value": "100"}}}]
    assert cluster_publishes_mig([other]) is False


def test_region_is_the_most_common_among_nodes():
    nodes = [
        node("a", zone="us-east-1a"),
        node("b", zone="us-east-1b"),
        node("c", zone="us-west-2a"),
    ]
    assert find_region(nodes, []) == "us-east-1"
