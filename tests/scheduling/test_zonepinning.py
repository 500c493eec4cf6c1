"""What pins a new NodeClaim's zone (the result's ``zonePinnedBy``), on the examples where a
volume, a topology spread and a pod affinity each narrow it."""

from __future__ import annotations

import io
import json
from pathlib import Path

from allocator.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _node_claims(name: str) -> dict[str, dict]:
    out, err = io.StringIO(), io.StringIO()
    assert main(["simulate", str(EXAMPLES / name), "--json"], stdout=out, stderr=err) == 0
    return {nc["name"]: nc for nc in json.loads(out.getvalue())["nodeClaims"]}


def _zone(nc: dict) -> list[str]:
    return next(
        r["values"] for r in nc["requirements"] if r["key"] == "topology.kubernetes.io/zone"
    )


def test_a_bound_volume_names_the_persistent_volume_that_pins_the_zone():
    (nc,) = _node_claims("volumes-zonal-model-cache.yaml").values()
    assert _zone(nc) == ["us-west-2b"]
    (pin,) = nc["zonePinnedBy"]
    assert pin["source"] == "volume" and pin["pod"] == "inference/llama-serve-0"
    assert "PersistentVolumeClaim inference/model-cache" in pin["detail"]
    assert pin["detail"].endswith("topology.kubernetes.io/zone In [us-west-2b]")


def test_a_zone_spread_names_each_pod_it_spread_after_the_nodepools_zones():
    ncs = _node_claims("topology-zone-spread.yaml")
    assert sorted(_zone(nc)[0] for nc in ncs.values()) == ["us-west-2a", "us-west-2b"]
    for nc in ncs.values():
        pool, *pins = nc["zonePinnedBy"]
        assert pool["source"] == "nodepool" and pool["pod"] is None
        assert [p["pod"] for p in pins] == nc["pods"]
        assert {p["detail"] for p in pins} == {
            "topology spread over zones (maxSkew 1, DoNotSchedule)"
        }


def test_a_pod_affinity_over_zones_is_what_pinned_the_decoder():
    (nc,) = _node_claims("topology-decoder-affinity.yaml").values()
    assert _zone(nc) == ["us-west-2b"]
    sources = [(p["source"], p["pod"], p["detail"]) for p in nc["zonePinnedBy"]]
    assert ("topology", "inference/decoder-0", "pod affinity over zones") in sources


def test_nothing_pins_a_nodeclaim_without_a_zone_requirement():
    ncs = _node_claims("demo-snapshot.yaml")
    unzoned = [
        nc
        for nc in ncs.values()
        if not any(r["key"] == "topology.kubernetes.io/zone" for r in nc["requirements"])
    ]
    assert unzoned and all(nc["zonePinnedBy"] == [] for nc in unzoned)
