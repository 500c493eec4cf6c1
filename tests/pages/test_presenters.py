"""The Karpenter-style aggregation of failure reasons and NodeClaim costs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dra_web.pages import presenters
from tests.pages.builders import result_device


def test_reasons_aggregate_like_kube_scheduler_with_nodepools_last():
    reasons = [
        {
            "target": f"node/ip-10-0-1-{i}",
            "reason": "allocating dynamic resources, cannot allocate all claims",
        }
        for i in range(8)
    ]
    reasons += [
        {
            "target": f"node/ip-10-0-2-{i}",
            "reason": "incompatible requirements, key topology.kubernetes.io/zone, us-west-2b not in us-west-2a",
        }
        for i in range(4)
    ]
    reasons.append(
        {
            "target": "nodepool/gpu-pool",
            "reason": 'incompatible with nodepool "gpu-pool", allocating dynamic resources, no instance type can satisfy the allocation',
        }
    )
    assert presenters.aggregate_reasons(reasons) == (
        "0/12 nodes: 8 no free device, 4 incompatible requirements; "
        "0/1 NodePools: 1 no instance type can satisfy the allocation"
    )


def test_reason_phrases_keep_the_designs_error_substrings():
    assert presenters.reason_phrase("claim ml/x: selector: failed to compile: ERROR") == (
        "CEL selector failed to compile"
    )
    assert presenters.reason_phrase('device class "gpu.example.com" not found') == "not found"
    assert presenters.reason_phrase("exceeding maximum of 32 devices") == (
        "too many devices (exceeding maximum)"
    )
    assert presenters.reason_phrase("did not tolerate taint nvidia.com/gpu:NoSchedule") == (
        "untolerated taint"
    )
    assert presenters.reason_phrase("") == "unknown reason"


def test_nodeclaims_of_the_run_are_told_apart_from_nodes():
    reasons = [
        {"target": "node/cpu-node-1", "reason": "exceeds node resources"},
        {"target": "node/gpu-h100-1", "reason": "did not tolerate taint nvidia.com/gpu"},
        {"target": "nodepool/gpu-h100", "reason": "exceeding maximum"},
    ]
    assert presenters.aggregate_reasons(reasons, {"gpu-h100-1"}) == (
        "0/1 nodes: 1 insufficient resources; 0/1 NodeClaims: 1 untolerated taint; "
        "0/1 NodePools: 1 too many devices (exceeding maximum)"
    )


@given(
    st.lists(
        st.tuples(st.sampled_from(["node", "nodepool", "nodeclaim"]), st.text(max_size=40)),
        max_size=30,
    )
)
def test_aggregate_counts_every_target_once(entries):
    reasons = [
        {"target": f"{'node' if kind == 'nodeclaim' else kind}/n{i}", "reason": text}
        for i, (kind, text) in enumerate(entries)
    ]
    claims = {f"n{i}" for i, (kind, _) in enumerate(entries) if kind == "nodeclaim"}
    line = presenters.aggregate_reasons(reasons, claims)
    totals = [int(part.split("/")[1].split(" ")[0]) for part in line.split("; ") if part]
    assert sum(totals) == len(entries)
    if any(k == "nodepool" for k, _ in entries):
        assert line.split("; ")[-1].startswith("0/") and "NodePools" in line.split("; ")[-1]


def test_node_claim_cost_reads_the_price_or_falls_back_to_the_catalog():
    priced = {"name": "gpu-pool-1", "price": 98.32, "instanceTypes": ["p5.48xlarge"]}
    assert presenters.node_claim_cost(priced) == {"price": 98.32, "instanceType": None}
    unpriced = {"name": "gpu-pool-2", "instanceTypes": ["g6e.xlarge", "p5.48xlarge"]}
    unpriced["cost"] = presenters.node_claim_cost(unpriced)
    assert unpriced["cost"]["price"] is None
    presenters.fill_costs_from_catalog(
        [unpriced],
        {
            "g6e.xlarge": _catalog_type(("us-west-2a", "on-demand", 1.861)),
            "p5.48xlarge": _catalog_type(("us-west-2a", "on-demand", 98.32)),
        },
    )
    assert unpriced["cost"] == {"price": 1.861, "instanceType": "g6e.xlarge"}


def _catalog_type(*offerings):
    """An instance type's offerings as a catalog lists them: (zone, capacity type, price)."""
    from allocator.model import Offering

    return tuple(Offering(zone=z, capacity_type=c, price=p) for z, c, p in offerings)


def test_prices_follow_the_node_pools_capacity_types_and_zones():
    catalog = {
        "p5.48xlarge": _catalog_type(
            ("us-west-2a", "spot", 39.2),
            ("us-west-2a", "on-demand", 98.32),
            ("us-west-2b", "on-demand", 97.0),
        ),
        "g6e.12xlarge": _catalog_type(("us-west-2a", "spot", 4.1)),
    }
    on_demand = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    # No spot price for an on-demand-only NodePool; an instance type with only spot has none.
    assert presenters.allowed_prices(catalog, on_demand) == {"p5.48xlarge": 97.0}
    in_zone = [
        *on_demand,
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]},
    ]
    assert presenters.allowed_prices(catalog, in_zone) == {"p5.48xlarge": 98.32}
    assert presenters.allowed_prices(catalog, None) == {"p5.48xlarge": 39.2, "g6e.12xlarge": 4.1}
    rows = presenters.instance_types_by_price(
        ["p5.48xlarge", "g6e.12xlarge"], presenters.allowed_prices(catalog, None)
    )
    assert [r["name"] for r in rows] == ["g6e.12xlarge", "p5.48xlarge"] and rows[0]["cheapest"]


def test_result_view_puts_failed_pods_first_and_tolerates_missing_fields():
    view = presenters.result_view(
        {"pods": [{"pod": "ml/a", "scheduled": True}, {"pod": "ml/b", "scheduled": False}]}
    )
    assert [p["pod"] for p in view["failed"]] == ["ml/b"]
    assert view["stats"] == {"pods": 2, "scheduled": 1, "failed": 1}
    assert view["pools"] == [] and view["node_claims"] == []
    assert presenters.result_view(None)["pods"] == []


def test_option_changes_name_gates_and_disrupted_nodes():
    a = {"timeout": 5, "featureGates": {"DRADeviceTaints": True}, "disrupt": []}
    b = {"timeout": 5, "featureGates": {"DRADeviceTaints": False}, "disrupt": ["gpu-node-a"]}
    assert presenters.option_changes(a, b) == [
        "DRADeviceTaints on → off",
        "disrupt [] → ['gpu-node-a']",
    ]
    assert presenters.option_changes(a, a) == []


def test_diff_examples_name_no_candidate_nodeclaim():
    """The trace names a new NodeClaim's attempt by the name it would get; across two runs
    that name may be another NodeClaim or none, so the diff says "a new NodeClaim"."""
    from dra_web.pages.presenters import divergence_causes

    causes = divergence_causes(
        [
            {
                "type": "changed",
                "path": ["pod ml/train-0", "nodepool/gpu (new gpu-1)"],
                "a": {"kind": "target", "status": "ok", "reason": "allocated"},
                "b": {"kind": "target", "status": "failed", "reason": "count"},
                "subtree": 3,
            }
        ]
    )
    assert causes[0]["examples"][0]["path"] == [
        "pod ml/train-0",
        "nodepool/gpu (a new NodeClaim)",
    ]


def _gpu(instance_type: str | None, device: str = "gpu-0", **extra) -> dict:
    pool = f"{instance_type}-gpus" if instance_type else "ip-10-0-1-7"
    return result_device(pool, device, instance_type, **extra)


def test_a_template_device_on_many_instance_types_is_one_row():
    its = ["g6.xlarge", "g6.2xlarge", "g6.4xlarge", "g6.8xlarge", "g6.12xlarge"]
    rows = presenters.grouped_devices(
        [_gpu(it) for it in its] + [_gpu(it, "gpu-1") for it in its[:2]]
    )
    assert [(r["device"], r["instanceTypes"], r["pools"]) for r in rows] == [
        ("gpu-0", its, 5),
        ("gpu-1", its[:2], 2),
    ]
    assert rows[0]["pool"] == "g6.xlarge-gpus"  # the first entry's
    assert rows[0]["instanceTypesShown"] == "g6.xlarge, g6.2xlarge, g6.4xlarge and 2 more"
    assert rows[1]["instanceTypesShown"] == "g6.xlarge, g6.2xlarge"


def test_devices_that_differ_beyond_pool_and_instance_type_keep_their_rows():
    rows = presenters.grouped_devices(
        [
            _gpu("g6.xlarge", consumedCapacity={"memory": "10Gi"}),
            _gpu("g6.2xlarge", consumedCapacity={"memory": "20Gi"}),
            _gpu(None),
            _gpu(None, "gpu-3"),
        ]
    )
    assert [(r["pool"], r["device"], r["instanceTypes"]) for r in rows] == [
        ("g6.xlarge-gpus", "gpu-0", ["g6.xlarge"]),
        ("g6.2xlarge-gpus", "gpu-0", ["g6.2xlarge"]),
        ("ip-10-0-1-7", "gpu-0", []),
        ("ip-10-0-1-7", "gpu-3", []),
    ]
    assert rows[2]["instanceTypesShown"] == ""


def test_entries_alike_in_another_key_order_share_a_row():
    first = _gpu("g6.xlarge", consumedCapacity={"memory": "10Gi", "cores": "2"})
    second = dict(reversed(list(_gpu("g6.2xlarge").items())))
    second["consumedCapacity"] = {"cores": "2", "memory": "10Gi"}
    rows = presenters.grouped_devices([first, second])
    assert [r["instanceTypes"] for r in rows] == [["g6.xlarge", "g6.2xlarge"]]


def test_device_conditions_list_only_tolerated_and_binding_devices():
    taint = [{"key": "nvidia.com/ecc-errors", "operator": "Exists", "effect": "NoSchedule"}]
    pods = [
        {
            "pod": "ml-training/train-0",
            "target": {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True},
            "claims": [
                {
                    "claim": "ml-training/train-0-gpu",
                    "bindingTimeoutSeconds": 600,
                    "devices": [
                        _gpu("g6.xlarge"),
                        _gpu("g6.xlarge", "gpu-1", tolerations=taint),
                        _gpu("g6.xlarge", "gpu-2", bindingConditions=["dra.example.com/ready"]),
                        _gpu("g6.xlarge", "gpu-3", tolerations=taint, bindsToNode=True),
                    ],
                }
            ],
        }
    ]
    found = presenters.device_conditions(pods)
    assert [d["device"] for d in found["tolerated"]] == ["gpu-1", "gpu-3"]
    assert [d["device"] for d in found["binding"]] == ["gpu-2", "gpu-3"]
    assert all(d["bindingTimeoutSeconds"] == 600 for d in found["binding"])
    assert found["tolerated"][0]["pod"] == "ml-training/train-0"
    assert found["excluded"] == []


def test_instance_types_launching_the_same_devices_share_a_template_group():
    def slices(it: str, count: int) -> dict:
        devices = [f"gpu-{i}" for i in range(count)]
        return {
            "instanceType": it,
            "slices": [{"driver": "gpu.nvidia.com", "pool": f"{it}-gpus", "devices": devices}],
        }

    groups = presenters.template_groups(
        [slices("g6.xlarge", 1), slices("g6.12xlarge", 4), slices("g6.2xlarge", 1)]
    )
    assert [(g["instanceTypes"], g["slices"][0]["pool"]) for g in groups] == [
        (["g6.xlarge", "g6.2xlarge"], "g6.xlarge-gpus"),
        (["g6.12xlarge"], "g6.12xlarge-gpus"),
    ]
