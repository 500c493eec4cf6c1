"""Device-template shapes (allocator/templateshapes.py): instance types whose templates differ
only in names share one search of a NodeClaim, and no decision or word changes.

Random clusters: a NodePool over instance types of a few kinds (1 to 4 GPUs of a model, their
PCIe roots per 1 or 2 GPUs, a uuid per instance type or not, MIG-like halves consuming a shared
counter or not), several instance types of each kind (equal shapes under other names), and
pending pods asking for 1 to 3 GPUs (of a model, on one PCIe root through matchAttribute, by
uuid, or more than anyone has), so that NodeClaims fill up and pods fail on them. The result
document with the shape memo on is the one with it off (Tuning.shape_memo), words included.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.dfs import DFSContext, ITOutcome
from allocator.model import Device, ResourceSliceTemplate
from allocator.pools import template_devices
from allocator.scheduling.tuning import Tuning
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from allocator.templateshapes import ShapeIndex, signature
from tests.contract.conftest import (
    claim_template,
    device_class,
    instance_type,
    namespace,
    nodepool,
    pod,
    request,
)

DRIVER = "gpu.nvidia.com"
PCIE = "resource.kubernetes.io/pcieRoot"


def gpus(owner: str, model: str, count: int, per_root: int, uuid: bool, halves: bool) -> dict:
    devices = []
    counters = []
    for i in range(count):
        attributes: dict = {"model": {"string": model}, "index": {"int": i}}
        attributes[PCIE] = {"string": f"pci0000:{i // per_root:02x}"}
        if uuid:
            attributes["uuid"] = {"string": f"GPU-{owner}-{i}"}
        device: dict = {
            "name": f"gpu-{i}",
            "attributes": attributes,
            "capacity": {"memory": {"value": "24Gi" if model == "L4" else "80Gi"}},
        }
        if halves:
            counters.append({"name": f"gpu-{i}-mem", "counters": {"memory": {"value": "48Gi"}}})
            device["consumesCounters"] = [
                {"counterSet": f"gpu-{i}-mem", "counters": {"memory": {"value": "24Gi"}}}
            ]
        devices.append(device)
    return {
        "driver": DRIVER,
        "pool": {"name": f"{owner}-gpus"},
        "devices": devices,
        "sharedCounters": counters,
    }


def claim_templates() -> list[dict]:
    docs = []
    for model in ("L4", "H100", "T4"):
        for count in (1, 2, 3, 16):
            sel = [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}]
            docs.append(
                claim_template(
                    f"{model.lower()}-x{count}", requests=[request(count=count, selectors=sel)]
                )
            )
            same_root = claim_template(
                f"{model.lower()}-x{count}-root", requests=[request(count=count, selectors=sel)]
            )
            same_root["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": PCIE}]
            docs.append(same_root)
    by_uuid = [{"cel": {"expression": f'device.attributes["{DRIVER}"].uuid.startsWith("GPU-a")'}}]
    docs.append(claim_template("by-uuid", requests=[request(count=1, selectors=by_uuid)]))
    return docs


it_kind = st.tuples(
    st.sampled_from(["L4", "H100"]),
    st.integers(1, 4),  # GPUs
    st.sampled_from([1, 2]),  # GPUs per PCIe root
    st.booleans(),  # a uuid per instance type (read by no selector but one)
    st.booleans(),  # counters
    st.integers(1, 3),  # instance types of this kind
)
pod_kind = st.one_of(
    st.tuples(
        st.sampled_from(["L4", "H100", "T4"]),
        st.sampled_from([1, 2, 3, 16]),
        st.sampled_from(["", "-root"]),
    ),
    st.just(("by-uuid", 0, "")),
)


def cluster(kinds, pods, interleave: bool = False) -> list[dict]:
    """``interleave``: the copies of the kinds alternate in price order (a NodeClaim meets
    the instance types of one shape apart, not one after the other)."""
    docs = [namespace("default"), device_class(), nodepool("gpu-pool")]
    docs += claim_templates()
    n = 0
    for k, (model, count, per_root, uuid, halves, copies) in enumerate(kinds):
        for c in range(copies):
            name = f"{'ab'[c % 2]}{model.lower()}-{count}g-{k}{c}"
            docs.append(
                instance_type(
                    name,
                    cpu="16",
                    memory="64Gi",
                    offerings=[
                        {
                            "zone": "us-west-2a",
                            "capacityType": "on-demand",
                            "price": 1.0 + (c + k / 10 if interleave else count + n / 1000),
                            "available": True,
                        }
                    ],
                    slices=[gpus(name, model, count, per_root, uuid, halves)],
                )
            )
            n += 1
    for j, (model, count, suffix) in enumerate(pods):
        template = "by-uuid" if model == "by-uuid" else f"{model.lower()}-x{count}{suffix}"
        docs.append(
            pod(
                f"train-{j}",
                cpu="1",
                created=f"2026-12-01T10:00:{j:02d}Z",
                claims=[{"name": "gpu", "resourceClaimTemplateName": template}],
            )
        )
    return docs


def run(docs: list[dict], shapes: bool) -> dict:
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    result = simulate(snapshot, SimulationOptions(), tuning=Tuning(shape_memo=shapes)).result
    result["stats"].pop("seconds")
    result["stats"].pop("suggestionSeconds", None)
    return result


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(it_kind, min_size=1, max_size=4),
    pods=st.lists(pod_kind, min_size=1, max_size=10),
    interleave=st.booleans(),
)
def test_the_shape_memo_changes_no_decision_and_no_word(kinds, pods, interleave) -> None:
    docs = cluster(kinds, pods, interleave)
    assert run(docs, True) == run(docs, False)


def searches(monkeypatch, docs: list[dict], shapes: bool) -> tuple[dict, list[str]]:
    ran: list[str] = []
    original = DFSContext.run_instance_type

    def counted(self, instance_type, it_requirements, parent) -> ITOutcome:
        ran.append(instance_type)
        return original(self, instance_type, it_requirements, parent)

    monkeypatch.setattr(DFSContext, "run_instance_type", counted)
    result = run(docs, shapes)
    monkeypatch.undo()
    return result, ran


def test_instance_types_differing_in_names_only_are_searched_once(monkeypatch) -> None:
    # Three 4 x L4 types under other names (and uuids no selector reads), one 2 x H100: six
    # pods fill two NodeClaims, a 16-GPU pod fails on both and on a new one.
    kinds = [("L4", 4, 2, True, False, 3), ("H100", 2, 1, False, False, 1)]
    pods = [("L4", 1, "")] * 3 + [("L4", 2, "-root")] * 3 + [("L4", 16, "")]
    docs = cluster(kinds, pods)
    shared, ran_shared = searches(monkeypatch, docs, True)
    plain, ran_plain = searches(monkeypatch, docs, False)
    assert shared == plain
    assert [p["pod"] for p in shared["pods"] if not p["scheduled"]] == ["default/train-6"]
    # Each NodeClaim keeps all three L4 types: their devices are each type's own.
    for nc in shared["nodeClaims"]:
        assert sorted(nc["instanceTypes"]) == ["al4-4g-00", "al4-4g-02", "bl4-4g-01"]
    placed = next(p for p in shared["pods"] if p["pod"] == "default/train-3")
    pools = {d["pool"] for c in placed["claims"] for d in c["devices"]}
    assert pools == {"al4-4g-00-gpus", "bl4-4g-01-gpus", "al4-4g-02-gpus"}
    # The L4 types are searched once per NodeClaim state, not once each.
    assert len(ran_shared) < len(ran_plain)
    assert ran_plain.count("bl4-4g-01") > ran_shared.count("bl4-4g-01")


def test_instance_types_refusing_alike_share_one_funnel(monkeypatch) -> None:
    # Four 4 x L4 and two 2 x H100 types, alternating by price; a 16-GPU pod fails on the
    # NodeClaim the first pods opened (it keeps every type) and on a new one. Each NodeClaim's
    # refusal is one funnel per shape standing for the types alike, and reads as the six
    # funnels of the plain path: six types, the count cause, one reason per target.
    from allocator.allocator import Allocator

    funnels: list[list] = []
    allocate = Allocator.allocate

    def kept(self, node_claim, claims, **kwargs):
        try:
            return allocate(self, node_claim, claims, **kwargs)
        finally:
            if kwargs.get("explain", True) and self.last_funnels:
                funnels.append(list(self.last_funnels))

    kinds = [("L4", 4, 2, False, False, 4), ("H100", 2, 1, False, False, 2)]
    docs = cluster(kinds, [("L4", 1, "")] * 2 + [("L4", 16, "")], interleave=True)
    monkeypatch.setattr(Allocator, "allocate", kept)
    shared = run(docs, True)
    grouped, funnels[:] = list(funnels), []
    plain = run(docs, False)
    monkeypatch.undo()
    assert shared == plain
    assert max(len(f) for f in grouped) == 2  # per shape, not per instance type
    assert max(len(f) for f in funnels) == 6
    alike = sorted(len(f.alike) for f in grouped[0])
    assert alike == [1, 3]  # one H100 and three L4 types stand behind the searched ones
    failed = next(p for p in shared["pods"] if not p["scheduled"])
    assert failed["cause"]["reason"] == "count"
    kinds_seen = {f["instanceTypes"] for f in failed["explanation"] if "instanceTypes" in f}
    assert kinds_seen == {4, 2}


def test_a_selector_reading_the_uuid_keeps_the_instance_types_apart(monkeypatch) -> None:
    kinds = [("L4", 2, 1, True, False, 3)]
    docs = cluster(kinds, [("by-uuid", 0, "")] * 2)
    shared, ran_shared = searches(monkeypatch, docs, True)
    plain, ran_plain = searches(monkeypatch, docs, False)
    assert shared == plain
    assert ran_shared == ran_plain


def _template(pool: str, uuid: str, root: str = "pci0000:00") -> list[ResourceSliceTemplate]:
    attributes = {"model": "L4", "uuid": uuid, PCIE: root}
    return [ResourceSliceTemplate(DRIVER, pool, [Device("gpu-0", attributes)])]


def test_the_signature_leaves_out_pool_names_and_attributes_nothing_reads() -> None:
    a = _template("p5.48xlarge-gpus", "GPU-1")
    b = _template("p5e.48xlarge-gpus", "GPU-2")
    read = frozenset({(DRIVER, "model"), ("resource.kubernetes.io", "pcieRoot")})
    assert signature(a, read) == signature(b, read)
    assert signature(a, None) != signature(b, None)  # a selector reading the whole device
    assert signature(a, read | {(DRIVER, "uuid")}) != signature(b, read | {(DRIVER, "uuid")})
    other_root = _template("p5e.48xlarge-gpus", "GPU-2", "pci0000:01")
    assert signature(a, read) != signature(other_root, read)


def test_instance_types_of_one_shape_share_a_key_and_keep_their_positions() -> None:
    index = ShapeIndex()
    read = frozenset({(DRIVER, "model")})
    a, b = _template("a-gpus", "GPU-1"), _template("b-gpus", "GPU-2")
    devices = template_devices({"a": a, "b": b})
    shape_a = index.shape("a", a, devices["a"], read)
    shape_b = index.shape("b", b, devices["b"], read)
    assert shape_a.key == shape_b.key
    assert shape_b.positions == {devices["b"][0].id: 0}
    assert index.shape("a", a, devices["a"], read) is shape_a  # worked out once
