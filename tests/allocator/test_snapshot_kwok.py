"""Karpenter KWOK's instance_types.json, read as Karpenter's KWOK provider reads it.

The provider (kwok/cloudprovider/helpers.go) decodes the file with ``json.Unmarshal`` into
``InstanceTypeOptions``; Go's encoding/json "preferring an exact match but also accepting a
case-insensitive match" of object keys to field names, so an offering's ``price`` fills
``Price``. Its offerings carry zone and capacity type only as ``Requirements``; the example
catalog the KWOK README points to (kwok/examples/instance_types.json, copied as a fixture with
its Apache-2.0 notice) still writes the legacy ``zone``/``capacityType`` keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from allocator.quantity import Quantity
from allocator.snapshot import SnapshotError, load_files, load_paths

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
EXAMPLE = FIXTURES / "karpenter-kwok-example-instance_types.json"


def _problems(doc) -> list[str]:
    with pytest.raises(SnapshotError) as err:
        load_files([("catalog.json", json.dumps(doc))])
    return err.value.problems


def test_karpenters_example_catalog_loads_with_its_lowercase_offering_keys():
    snapshot = load_paths([str(EXAMPLE)])
    g5 = snapshot.instance_types["g5.4xlarge"]
    assert [(o.zone, o.capacity_type, o.price) for o in g5.offerings] == [
        ("us-east-1a", "on-demand", 1.624),
        ("us-east-1b", "on-demand", 1.7),
        ("us-east-1c", "on-demand", 1.525),
    ]
    assert g5.capacity["nvidia.com/gpu"] == Quantity.parse("1")
    assert g5.capacity["memory"] == Quantity.parse("64Gi")


def test_legacy_zone_and_capacity_type_keys_are_read_as_requirements_with_a_warning():
    """Today's KWOK offering (``KWOKOffering``) has no Zone or CapacityType field: the
    provider would ignore these keys and find no zone. They are read as the
    topology.kubernetes.io/zone and karpenter.sh/capacity-type requirements they meant."""
    snapshot = load_paths([str(EXAMPLE)])
    warnings = [w for w in snapshot.warnings if "legacy key" in w]
    assert len(warnings) == 6  # zone and capacityType of three offerings, once each
    assert warnings[0].startswith(
        f"{EXAMPLE} doc 1 InstanceType g5.4xlarge: offerings[0].zone: legacy key read as "
        "the requirement topology.kubernetes.io/zone In [us-east-1a]"
    )
    assert any(
        "offerings[2].capacityType: legacy key read as the requirement "
        "karpenter.sh/capacity-type In [on-demand]" in w
        for w in warnings
    )


@pytest.mark.parametrize("price_key", ["Price", "price", "PRICE", "pRiCe"])
def test_offering_keys_match_case_insensitively_like_go_encoding_json(price_key):
    doc = [
        {
            "NAME": "c-4x",
            "Offerings": [
                {
                    price_key: 0.25,
                    "AVAILABLE": False,
                    "requirements": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    ],
                }
            ],
            "Resources": {"cpu": "4"},
        }
    ]
    snapshot = load_files([("catalog.json", json.dumps(doc))])
    (offering,) = snapshot.instance_types["c-4x"].offerings
    assert (offering.zone, offering.capacity_type, offering.price, offering.available) == (
        "a",
        "spot",
        0.25,
        False,
    )
    assert not snapshot.warnings  # requirements are today's shape: nothing to warn about


def test_the_last_of_keys_differing_only_in_case_wins_like_go_encoding_json():
    """encoding/json assigns every matching key in order, so the later one overwrites."""
    doc = [
        {
            "name": "c-4x",
            "offerings": [{"zone": "a", "capacityType": "spot", "Price": 1.0, "price": 2.0}],
        }
    ]
    snapshot = load_files([("catalog.json", json.dumps(doc))])
    assert snapshot.instance_types["c-4x"].offerings[0].price == 2.0


def test_each_problem_once_with_the_path_of_the_users_file():
    """Before: every problem twice, the second time as spec.offerings[0].zone, a path that is
    not in the file."""
    doc = [{"name": "c-4x", "offerings": [{"price": "cheap"}], "resources": {"cpu": "four"}}]
    assert _problems(doc) == [
        "catalog.json doc 1 InstanceType c-4x: offerings[0]: no zone "
        "(topology.kubernetes.io/zone requirement or zone)",
        "catalog.json doc 1 InstanceType c-4x: offerings[0]: no capacity type "
        "(karpenter.sh/capacity-type requirement or capacityType)",
        "catalog.json doc 1 InstanceType c-4x: offerings[0].price: must be a number, not a string",
        "catalog.json doc 1 InstanceType c-4x: resources.cpu: invalid quantity: "
        "quantity 'four': missing numeric part",
    ]


def test_a_legacy_key_contradicting_the_requirement_is_a_problem():
    doc = [
        {
            "name": "c-4x",
            "offerings": [
                {
                    "zone": "b",
                    "capacityType": "spot",
                    "Requirements": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                    ],
                }
            ],
        }
    ]
    (problem,) = _problems(doc)
    assert problem == (
        "catalog.json doc 1 InstanceType c-4x: offerings[0].zone: 'b' contradicts the "
        "offering's topology.kubernetes.io/zone requirement 'a'"
    )


def test_a_kwok_name_follows_label_values_as_the_instance_type_label_does():
    doc = [{"name": "a/b", "offerings": [{"zone": "a", "capacityType": "spot"}]}]
    (problem,) = _problems(doc)
    assert problem.startswith("catalog.json doc 1 InstanceType a/b: name: invalid InstanceType")
    ok = [
        {"name": "Standard_NC24ads_A100_v4", "offerings": [{"zone": "a", "capacityType": "spot"}]}
    ]
    assert "Standard_NC24ads_A100_v4" in load_files([("c.json", json.dumps(ok))]).instance_types


def test_a_gpu_pod_launches_on_the_example_catalogs_cheapest_zone(tmp_path):
    """The KWOK README's flow: the example catalog beside a NodePool; a pod asking for
    nvidia.com/gpu gets a g5.4xlarge NodeClaim whose zones are the legacy keys' values, and
    the cheapest offering (us-east-1c, 1.525) is the one Karpenter would launch."""
    from allocator.simulation import SimulationOptions, simulate
    from tests.contract.conftest import namespace, nodepool, pod, write_yaml

    def launch(**selector: str) -> dict:
        gpu_pod = pod("cuda-vector-add", cpu="4", memory="16Gi", node_selector=selector or None)
        gpu_pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        cluster = write_yaml(tmp_path, [namespace("default"), nodepool("default"), gpu_pod])
        snapshot = load_paths([str(cluster), str(EXAMPLE)])
        assert len([w for w in snapshot.warnings if "legacy key" in w]) == 6  # once each
        result = simulate(snapshot, SimulationOptions()).result
        (entry,) = result["pods"]
        assert entry["scheduled"], entry.get("error")
        (claim,) = result["nodeClaims"]
        assert claim["instanceTypes"] == ["g5.4xlarge"]
        return claim

    assert launch()["price"] == 1.525  # us-east-1c
    # The legacy zone key is the offering's zone requirement: pinned to us-east-1b, 1.7.
    pinned = launch(**{"topology.kubernetes.io/zone": "us-east-1b"})
    assert pinned["price"] == 1.7
    zone = [r for r in pinned["requirements"] if r["key"] == "topology.kubernetes.io/zone"]
    assert zone == [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}
    ]
