"""The NodeClaim fast path changes how a NodeClaim's refusal is found, never a decision.

Random clusters: a few existing GPU nodes (H100 or L4, some GPUs taken), optionally a pool of
network-attached RDMA NICs any node can reach (so NodeClaims read in-cluster devices too), a
NodePool (with or without limits) over instance types with 1 to 4 GPUs of one model in one or
two zones, and pending pods asking for 1 to 3 GPUs of a model (T4: nobody has it), some pinned
to a zone, some with a NIC as well; the NodePool may be tainted, and some pods tolerate it (a
NodeClaim's taint refuses a pod before its device bound does). The result document with the NodeClaim caches switched on
(refusals found without their words first, reused while nothing they read changed, shared
count funnels of fresh NodeClaims) is the one with them switched off, apart from clock readings.
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
    held_device,
    instance_type,
    namespace,
    node,
    nodepool,
    pod,
    request,
    resource_slice,
    template_slice,
)

MODELS = ("H100", "L4", "A10G", "T4")
ZONES = ("us-west-2a", "us-west-2b")


def gpus(model: str, count: int) -> list[dict]:
    return [
        {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": model}, "index": {"int": i}},
            "capacity": {"memory": {"value": "24Gi" if model == "L4" else "80Gi"}},
        }
        for i in range(count)
    ]


def model_selector(model: str) -> list[dict]:
    return [{"cel": {"expression": f'device.attributes["gpu.nvidia.com"].model == "{model}"'}}]


node_spec = st.tuples(st.sampled_from(MODELS[:2]), st.integers(1, 4), st.integers(0, 3))
it_spec = st.tuples(
    st.sampled_from(MODELS[:3]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([8, 16, 32]),
    st.sampled_from([(ZONES[0],), ZONES]),
)
pod_spec = st.tuples(
    st.sampled_from(MODELS),
    st.integers(1, 3),
    st.sampled_from([1, 2, 4, 8]),
    st.none() | st.sampled_from(ZONES),
    st.booleans(),  # a NIC too
    st.booleans(),  # tolerates the NodePool's taint
)
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def cluster(nodes, its, pods, nics: int, limits: bool, tainted: bool = False) -> list[dict]:
    docs = [namespace("default"), device_class(), device_class("rdma.example.com")]
    for i, (model, count, taken) in enumerate(nodes):
        name = f"ip-10-0-2-{i}.us-west-2.compute.internal"
        docs.append(node(name, cpu="32", memory="256Gi"))
        docs.append(resource_slice(name, gpus(model, count)))
        for t in range(min(taken, count)):
            held = f"serve-{i}-{t}"
            docs.extend(held_device(held, name, f"gpu-{t}"))
    if nics:
        devices = [
            {"name": f"nic-{i}", "attributes": {"rdma": {"bool": True}}} for i in range(nics)
        ]
        docs.append(
            resource_slice(None, devices, driver="rdma.example.com", pool="fabric", allNodes=True)
        )
    docs.append(claim_template("nic", requests=[request("nic", cls="rdma.example.com")]))
    for m in MODELS:
        for count in (1, 2, 3):
            docs.append(
                claim_template(
                    f"{m.lower()}-x{count}",
                    requests=[request(count=count, selectors=model_selector(m))],
                )
            )
    docs.append(
        nodepool(
            "gpu-pool",
            limits={"cpu": "48"} if limits else None,
            taints=[TAINT] if tainted else None,
        )
    )
    for j, (model, count, cpu, zones) in enumerate(its):
        name = f"{model.lower()}.{count}g{j}"
        offerings = [
            {"zone": z, "capacityType": "on-demand", "price": 1.0 + count + cpu / 100 + j / 1000}
            for z in zones
        ]
        offerings = [dict(o, available=True) for o in offerings]
        docs.append(
            instance_type(
                name,
                cpu=str(cpu),
                memory=f"{cpu * 8}Gi",
                offerings=offerings,
                slices=[template_slice(f"{name}-gpus", gpus(model, count))],
            )
        )
    for j, (model, count, cpu, zone, nic, *tolerates) in enumerate(pods):
        claims = [{"name": "gpu", "resourceClaimTemplateName": f"{model.lower()}-x{count}"}]
        if nic:
            claims.append({"name": "nic", "resourceClaimTemplateName": "nic"})
        docs.append(
            pod(
                f"train-{j}",
                cpu=str(cpu),
                created=f"2026-12-01T10:00:{j:02d}Z",
                claims=claims,
                node_selector={"topology.kubernetes.io/zone": zone} if zone else None,
                tolerations=[{**TAINT, "operator": "Equal"}] if any(tolerates) else None,
            )
        )
    return docs


# Each fast path of the NodeClaims switched off alone (the others on).
ONE_OFF = (Tuning(instance_type_index=False), Tuning(explain_recorded=False))


def run(docs: list[dict], caches: bool, tuning: Tuning | None = None) -> dict:
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    tuning = tuning or Tuning(nodeclaim_caches=caches)
    result = simulate(snapshot, SimulationOptions(), tuning=tuning).result
    result["stats"].pop("seconds")
    result["stats"].pop("suggestionSeconds", None)
    return result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node_spec, max_size=3),
    its=st.lists(it_spec, min_size=1, max_size=4),
    pods=st.lists(pod_spec, min_size=1, max_size=12),
    nics=st.integers(0, 3),
    limits=st.booleans(),
    tainted=st.booleans(),
)
def test_nodeclaim_caches_change_no_decision(nodes, its, pods, nics, limits, tainted) -> None:
    docs = cluster(nodes, its, pods, nics, limits, tainted)
    fast = run(docs, True)
    plain = run(docs, False)
    assert fast == plain
    for tuning in ONE_OFF:
        assert run(docs, True, tuning) == fast, tuning


def test_a_lasting_bound_is_known_without_asking_only_where_no_taint_refuses_first() -> None:
    # The scheduler skips asking a NodeClaim whose device-count bound refused pods of the same
    # claim specs (it lasts while the NodeClaim lives). can_add checks taints first: a tainted
    # NodeClaim must be asked, so that a pod not tolerating the taint is told the taint.
    from dataclasses import replace
    from types import SimpleNamespace

    from allocator.model import Taint
    from allocator.requirements import Requirements
    from allocator.scheduling.nodeclaim import NodeClaim
    from allocator.scheduling.refusalcache import RefusalCache

    specs = (("default", "l4-x2"),)
    state = SimpleNamespace(cache=RefusalCache())
    state.cache.lasting_bounds.add(("gpu-pool-1", specs))
    plain = NodeClaim(
        id="gpu-pool-1",
        name="gpu-pool-1",
        node_pool="gpu-pool",
        requirements=Requirements(),
        candidates=[],
        taints=[],
    )
    tainted = replace(plain, taints=[Taint("nvidia.com/gpu", "present", "NoSchedule")])
    assert plain.refused_lastingly(specs, state)
    assert not tainted.refused_lastingly(specs, state)
    assert not plain.refused_lastingly((("default", "l4-x1"),), state)


def test_a_pod_failing_on_full_nodeclaims_of_another_model_is_told_the_model_first() -> None:
    # 12 one-GPU L4 pods fill three NodeClaims of 4 L4s (the 1-GPU and H100 types dropped);
    # a T4 pod then fails everywhere: its refusals on the NodeClaims, found without words,
    # are explained afterwards with the words of a full attempt (who holds each GPU).
    pods = [("L4", 1, 2, None, False)] * 12 + [("T4", 1, 2, None, False)]
    its = [("L4", 1, 8, ZONES), ("L4", 4, 16, ZONES), ("H100", 4, 32, ZONES)]
    docs = cluster([], its, pods, 0, False)
    fast = run(docs, True)
    assert fast == run(docs, False)
    assert [(nc["instanceTypes"], len(nc["pods"])) for nc in fast["nodeClaims"]] == [
        (["l4.4g1"], 4)
    ] * 3
    failed = [p for p in fast["pods"] if not p["scheduled"]]
    assert [p["pod"] for p in failed] == ["default/train-12"]
    reasons = {r["target"]: r["reason"] for r in failed[0]["reasons"]}
    for nc in fast["nodeClaims"]:
        reason = reasons[f"node/{nc['name']}"]
        assert "l4.4g1: claim default/train-12-gpu request gpu: 0 of 1 devices available" in reason
        # The L4s are held, but what decides is that they are not T4s: the holders are
        # named only as what also refuses them.
        assert 'rejected by selector: model is "L4"' in reason
    on_node_claims = [
        f for f in failed[0]["explanation"] if f["exampleTargets"][0].startswith("node/")
    ]
    assert on_node_claims
    for funnel in on_node_claims:
        assert [(g["reason"], g["also"]) for g in funnel["rejections"]] == [
            ("selector", ["allocated"])
        ]
    assert 'rejected by selector: model is "L4"' in reasons["nodepool/gpu-pool"]


def test_failed_pods_of_one_shape_are_worded_once_in_their_last_pass(monkeypatch) -> None:
    # train-12 (T4) fails on three full L4 NodeClaims; train-13 (L4) opens a fourth; train-14
    # (T4, the same shape as train-12) fails again. Both failed after a placement of the first
    # pass, so both are tried again and only that last try is worded: train-12 asks each of
    # the four NodeClaims once, and train-14, the same shape in the same state, takes its
    # words, naming its own claim.
    from allocator.scheduling.nodeclaim import NodeClaim

    asked: list[tuple[str, str]] = []
    explain = NodeClaim.explain

    def counted(self, pod, state):
        asked.append((self.name, pod.pod.key))
        return explain(self, pod, state)

    monkeypatch.setattr(NodeClaim, "explain", counted)
    l4, t4 = ("L4", 1, 2, None, False), ("T4", 1, 2, None, False)
    its = [("L4", 1, 8, ZONES), ("L4", 4, 16, ZONES), ("H100", 4, 32, ZONES)]
    docs = cluster([], its, [l4] * 12 + [t4, l4, t4], 0, False)
    fast = run(docs, True)
    assert [a for a in asked if a[1] == "default/train-14"] == []
    assert sorted(a for a in asked if a[1] == "default/train-12") == [
        (f"gpu-pool-{i}", "default/train-12") for i in (1, 2, 3, 4)
    ]
    assert fast == run(docs, False)
    failed = {p["pod"]: p for p in fast["pods"] if not p["scheduled"]}
    assert sorted(failed) == ["default/train-12", "default/train-14"]
    reasons = {r["target"]: r["reason"] for r in failed["default/train-14"]["reasons"]}
    for name in ("gpu-pool-1", "gpu-pool-2", "gpu-pool-3", "gpu-pool-4"):
        assert (
            "claim default/train-14-gpu request gpu: 0 of 1 devices available"
            in (reasons[f"node/{name}"])
        )
        assert "train-12" not in reasons[f"node/{name}"]


def test_a_nodeclaim_holding_devices_counts_each_refusal_once_per_state(monkeypatch) -> None:
    # The same scene: train-12 is tried again after train-13 and train-14. The three full L4
    # NodeClaims hold the same GPUs every time it fails there: the count stage's funnel of an
    # instance type is worked out once per NodeClaim and devices held, then reused.
    from allocator.explanation.builder import FunnelBuilder

    counted: list[tuple] = []
    count_refusal = FunnelBuilder._count_refusal

    def recorded(self, search, claim, req):
        held = search.tracker.templates.get(search.node_claim_id, {})
        mine = frozenset(held.get(search.instance_type, ()))
        spec = repr(claim.claim.spec)
        # One simulation's counts (suggestions re-run the loop with an Allocator of their own).
        run_id = id(self.memo)
        counted.append((run_id, search.node_claim_id, search.instance_type, spec, mine))
        return count_refusal(self, search, claim, req)

    monkeypatch.setattr(FunnelBuilder, "_count_refusal", recorded)
    l4, t4 = ("L4", 1, 2, None, False), ("T4", 1, 2, None, False)
    its = [("L4", 1, 8, ZONES), ("L4", 4, 16, ZONES), ("H100", 4, 32, ZONES)]
    docs = cluster([], its, [l4] * 12 + [t4, l4, t4], 0, False)
    fast = run(docs, True)
    on_held = [c for c in counted if c[4]]
    assert on_held  # the full NodeClaims were counted with their GPUs held
    assert len(set(on_held)) == len(on_held)
    assert fast == run(docs, False)


def test_failed_pods_of_other_sizes_share_allocates_words_on_unchanged_nodeclaims(
    monkeypatch,
) -> None:
    # train-12 (T4, 2 CPUs) and train-13 (T4, 3 CPUs: another pod shape) fail on three full L4
    # NodeClaims. Their claims have one spec and each NodeClaim keeps the same instance types
    # for both: Allocate's words there are worked out for the first worded (train-13, the
    # bigger, in their last pass) and are the other's too, naming its own claim.
    from allocator.allocator import Allocator

    asked: list[tuple[int, str, str]] = []
    allocate = Allocator.allocate

    def counted(self, node_claim, claims, **kwargs):
        # The full NodeClaims kept l4.4g1 only (a new one offers all three types).
        if kwargs.get("explain", True) and node_claim.instance_types == ["l4.4g1"]:
            asked.append((id(self), node_claim.id, claims[0].key))
        return allocate(self, node_claim, claims, **kwargs)

    monkeypatch.setattr(Allocator, "allocate", counted)
    l4 = ("L4", 1, 2, None, False)
    its = [("L4", 1, 8, ZONES), ("L4", 4, 16, ZONES), ("H100", 4, 32, ZONES)]
    docs = cluster(
        [], its, [l4] * 12 + [("T4", 1, 2, None, False), ("T4", 1, 3, None, False)], 0, False
    )
    fast = run(docs, True)
    monkeypatch.undo()
    # The simulation's own Allocator (suggestions' trials run with their own).
    run_id = asked[0][0]
    first = {nc for a, nc, claim in asked if a == run_id and claim == "default/train-13-gpu"}
    second = {nc for a, nc, claim in asked if a == run_id and claim == "default/train-12-gpu"}
    assert first == {"gpu-pool-1", "gpu-pool-2", "gpu-pool-3"}
    assert not second
    assert fast == run(docs, False)
    failed = {p["pod"]: p for p in fast["pods"] if not p["scheduled"]}
    assert sorted(failed) == ["default/train-12", "default/train-13"]
    reasons = {r["target"]: r["reason"] for r in failed["default/train-12"]["reasons"]}
    for name in ("gpu-pool-1", "gpu-pool-2", "gpu-pool-3"):
        words = reasons[f"node/{name}"]
        assert "claim default/train-12-gpu request gpu: 0 of 1 devices available" in words
        assert "train-13" not in words


def test_a_nodeclaims_count_bound_is_worked_out_once_per_state(monkeypatch) -> None:
    # Twelve one-GPU pods fill six NodeClaims of 2 L4s; five pods of other sizes then ask
    # for 3 L4s, more than any instance type has: each NodeClaim refuses all five by its
    # count bound, which is worked out once per NodeClaim and state, not once per pod.
    from allocator.scheduling.refusalcache import RefusalCache

    worked: list[tuple[int, str, int]] = []
    most = RefusalCache.most_templates_left

    def counted(self, nc_id, candidates, held):
        hit = self._templates_left.get(nc_id)
        version = self._nc_versions.get(nc_id)
        if version is not None and (hit is None or hit[0] != version):
            worked.append((id(self), nc_id, version))  # of a launched NodeClaim, worked out
        return most(self, nc_id, candidates, held)

    monkeypatch.setattr(RefusalCache, "most_templates_left", counted)
    l4 = ("L4", 1, 6, None, False)  # larger: placed first
    big = [("L4", 3, cpu, None, False) for cpu in (1, 2, 3, 4, 5)]
    its = [("L4", 1, 8, ZONES), ("L4", 2, 16, ZONES)]
    docs = cluster([], its, big + [l4] * 12, 0, False)
    fast = run(docs, True)
    monkeypatch.undo()
    assert len(worked) == len(set(worked))  # never twice for one NodeClaim state
    assert fast == run(docs, False)
    failed = {p["pod"] for p in fast["pods"] if not p["scheduled"]}
    assert failed == {f"default/train-{i}" for i in range(5)}
    run_id = worked[0][0]  # the simulation's own (suggestions' trials have theirs)
    assert {nc for r, nc, _ in worked if r == run_id} == {f"gpu-pool-{i}" for i in range(1, 7)}


def test_failed_pods_keeping_fewer_instance_types_narrow_the_nodeclaims_words(
    monkeypatch,
) -> None:
    # Eight one-GPU L4 pods fill four NodeClaims that keep the three 2-GPU types (8, 16 and 32
    # CPUs); two T4 pods then fail on them: the 1-CPU one keeps all three types, the 6-CPU one
    # only the 16- and 32-CPU ones. The NodeClaims, alike (the same types, the same devices
    # held), are asked once, in words, over all their types: the first one, whose words name
    # nothing of its own, for all four. Each pod's refusal is those narrowed to the types it
    # keeps (for the bigger pod the 16-CPU type, no longer sharing the 8-CPU one's search, is
    # searched alone on each NodeClaim).
    from allocator.allocator import Allocator
    from allocator.scheduling import nodeclaim

    asked: list[tuple[int, str, tuple[str, ...]]] = []
    allocate = Allocator.allocate

    def counted(self, node_claim, claims, **kwargs):
        if kwargs.get("explain", True) and claims[0].key in (
            "default/train-8-gpu",
            "default/train-9-gpu",
        ):
            asked.append((id(self), node_claim.id, tuple(node_claim.instance_types)))
        return allocate(self, node_claim, claims, **kwargs)

    narrowings: list[bool] = []
    narrowed = nodeclaim.narrowed

    def noted(err, instance_types, search):
        found = narrowed(err, instance_types, search)
        narrowings.append(found is not None)
        return found

    monkeypatch.setattr(Allocator, "allocate", counted)
    monkeypatch.setattr(nodeclaim, "narrowed", noted)
    l4 = ("L4", 1, 2, None, False)
    its = [("L4", 1, 8, ZONES), ("L4", 2, 8, ZONES), ("L4", 2, 16, ZONES), ("L4", 2, 32, ZONES)]
    pods = [l4] * 8 + [("T4", 1, 1, None, False), ("T4", 1, 6, None, False)]
    docs = cluster([], its, pods, 0, False)
    fast = run(docs, True)
    monkeypatch.undo()
    assert fast == run(docs, False)
    kept = {nc["name"]: nc["instanceTypes"] for nc in fast["nodeClaims"]}
    assert set(map(tuple, kept.values())) == {("l4.2g1", "l4.2g2", "l4.2g3")}
    assert narrowings and all(narrowings)
    run_id = asked[0][0]  # the simulation's own Allocator (suggestions' trials have theirs)
    # Asked of the full NodeClaims (gpu-pool-1 was asked before, holding one GPU): all their
    # types once, and per NodeClaim the 16-CPU type alone once; never the 6-CPU pod's two.
    mine = [
        (nc, its)
        for r, nc, its in asked
        if r == run_id and nc in kept and set(its) <= set(kept[nc])
    ]
    wide = [nc for nc, its in mine if len(its) == 3]
    assert len(wide) == 1
    assert sorted(mine) == sorted(
        [(wide[0], ("l4.2g1", "l4.2g2", "l4.2g3"))] + [(nc, ("l4.2g2",)) for nc in kept]
    )
    failed = {p["pod"]: p for p in fast["pods"] if not p["scheduled"]}
    assert sorted(failed) == ["default/train-8", "default/train-9"]
    for name in kept:
        words = {
            p: {r["target"]: r["reason"] for r in failed[p]["reasons"]}[f"node/{name}"]
            for p in failed
        }
        assert "l4.2g1" in words["default/train-8"] and "l4.2g1" not in words["default/train-9"]
        assert "claim default/train-9-gpu request gpu" in words["default/train-9"]
        assert "train-8" not in words["default/train-9"]


def test_nodeclaims_of_another_model_refuse_by_their_selectors_without_allocate(
    monkeypatch,
) -> None:
    # Four L4 pods launch four NodeClaims of 4 L4s (one pod each: CPUs), then H100 pods come.
    # Once the first H100 pod passed Request Validation, the L4 NodeClaims, 3 GPUs free each,
    # refuse it by the template devices its selector accepts (none) without an Allocate: one
    # Allocate on them, not four.
    from allocator.allocator import Allocator

    asked: list[str] = []
    allocate = Allocator.allocate

    def counted(self, node_claim, claims, **kwargs):
        if any((c.generated_from_template or "").startswith("h100") for c in claims):
            asked.append(node_claim.id)
        return allocate(self, node_claim, claims, **kwargs)

    monkeypatch.setattr(Allocator, "allocate", counted)
    l4 = [("L4", 1, 6, None, False)] * 4  # larger: placed first
    h100 = [("H100", 1, 1, None, False)] * 2
    its = [("L4", 4, 8, ZONES), ("H100", 1, 8, ZONES)]
    docs = cluster([], its, l4 + h100, 0, False)
    fast = run(docs, True)
    monkeypatch.undo()
    assert fast == run(docs, False)
    assert all(p["scheduled"] for p in fast["pods"])
    launched_for_l4 = {f"gpu-pool-{i}" for i in range(1, 5)}
    assert len([nc for nc in asked if nc in launched_for_l4]) == 1


def test_nodeclaims_alike_share_the_words_over_their_instance_types(monkeypatch) -> None:
    # Four L4 pods launch four NodeClaims of 4 L4s holding the same template device; a T4 pod
    # (nobody has T4s) then fails on all four. Their words over all instance types name
    # nothing of their own (a selector refuses every L4, whoever holds it): worked out on the
    # first and shared by the three alike, not worked out four times.
    from allocator.scheduling import nodeclaim

    asked: list[str] = []
    aside = nodeclaim._refusal_aside

    def counted(probe, claims, pod, state):
        if len(probe.candidates) > 1:  # over all the NodeClaim's instance types
            asked.append(probe.id)
        return aside(probe, claims, pod, state)

    monkeypatch.setattr(nodeclaim, "_refusal_aside", counted)
    l4 = [("L4", 1, 6, None, False)] * 4  # larger: placed first
    t4 = [("T4", 1, 1, None, False)]
    its = [("L4", 4, 8, ZONES), ("L4", 4, 10, ZONES)]  # room for one L4 pod each
    docs = cluster([], its, l4 + t4, 0, False)
    shared = run(docs, True)
    shared_asked = list(asked)
    asked.clear()
    monkeypatch.setattr(nodeclaim.NodeClaim, "_alike_key", lambda self, key, probe, state: None)
    alone = run(docs, True)
    monkeypatch.undo()
    assert shared == alone == run(docs, False)
    failed = [p for p in shared["pods"] if not p["scheduled"]]
    assert [p["pod"] for p in failed] == ["default/train-4"]
    assert len(set(asked)) == 4 and len(shared_asked) < len(asked)


def test_nodeclaims_alike_keep_words_naming_their_own_holders() -> None:
    # Two-L4 pods launch NodeClaims of 4 L4s up to the NodePool's CPU limit, each holding
    # the same two template devices; a pod asking for 3 L4s then fails on all of them, each
    # refusal naming the claim holding that NodeClaim's L4s: those words are each
    # NodeClaim's own, never another's (the NodeClaims are alike otherwise).
    l4 = [("L4", 2, 6, None, False)] * 5  # larger: placed first
    its = [("L4", 4, 8, ZONES), ("L4", 4, 10, ZONES)]
    docs = cluster([], its, l4 + [("L4", 3, 1, None, False)], 0, True)
    fast = run(docs, True)
    assert fast == run(docs, False)
    failed = [p for p in fast["pods"] if not p["scheduled"]]
    assert len(failed) == 1
    holders: dict[str, set[str]] = {}
    for p in fast["pods"]:
        if p["scheduled"]:
            for c in p["claims"]:
                holders.setdefault(p["target"]["name"], set()).add(c["claim"])
    reasons = {r["target"]: r["reason"] for r in failed[0]["reasons"]}
    named = 0
    for nc, claims in holders.items():
        others = set().union(*(c for n, c in holders.items() if n != nc))
        words = reasons[f"node/{nc}"]
        named += any(c in words for c in claims)
        assert not any(c in words for c in others - claims), (nc, words)
    assert named == len(holders)


def test_a_nodeclaims_bound_lasts_only_where_every_instance_type_refuses(monkeypatch) -> None:
    # A NodePool of 48 CPUs over two L4 types: 4 GPUs and 8 CPUs, 2 GPUs and 32 CPUs. train-0
    # (1 L4, 6 CPUs) opens gpu-pool-1 over both (one GPU held on each); only the 8-CPU type
    # is left within the limits for the next NodeClaims. train-1 and train-2 ask for 2 L4s
    # with 4 and 3 CPUs: on gpu-pool-1 only the 2-GPU type still fits their CPUs, one GPU
    # left, so the count bound refuses them there, but not for good: train-3 (1 CPU) also
    # fits the 4-GPU type, three GPUs left, and takes it. train-1 and train-2 fill gpu-pool-2,
    # train-4 and train-5 gpu-pool-3. Where the bound refuses every type of a NodeClaim
    # (gpu-pool-1 and gpu-pool-2 for train-4, gpu-pool-3 for train-6) it lasts: train-6, of
    # another shape (less memory, so placed last) but the same claim spec, is refused there
    # without the bound asked again, in both of its passes, and fails (the limits are used
    # up).
    from allocator.scheduling.nodeclaim import NodeClaim

    bounded: list[tuple[str, str]] = []
    bound = NodeClaim._count_bound_refuses

    def counted(self, probe, pod, state, claims):
        refuses = bound(self, probe, pod, state, claims)
        if refuses:
            bounded.append((self.name, pod.pod.key))
        return refuses

    pods = [("L4", 1, 6, None, False), ("L4", 2, 4, None, False), ("L4", 2, 3, None, False)]
    pods += [("L4", 2, 1, None, False)] * 4
    its = [("L4", 4, 8, ZONES), ("L4", 2, 32, ZONES)]
    docs = cluster([], its, pods, 0, True)
    last = next(d for d in docs if d["metadata"]["name"] == "train-6")
    last["spec"]["containers"][0]["resources"]["requests"]["memory"] = "512Mi"
    fast = run(docs, True)
    assert fast == run(docs, False)
    placed = {p["pod"]: p["target"]["name"] for p in fast["pods"] if p["scheduled"]}
    assert placed == {
        "default/train-0": "gpu-pool-1",
        "default/train-1": "gpu-pool-2",
        "default/train-2": "gpu-pool-2",
        "default/train-3": "gpu-pool-1",
        "default/train-4": "gpu-pool-3",
        "default/train-5": "gpu-pool-3",
    }
    # The loop alone (suggestions' trials ask again, for claims they change).
    monkeypatch.setattr(NodeClaim, "_count_bound_refuses", counted)
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    simulate(snapshot, SimulationOptions(suggestions=False), tuning=Tuning())
    assert bounded == [
        ("gpu-pool-1", "default/train-2"),
        ("gpu-pool-1", "default/train-4"),
        ("gpu-pool-2", "default/train-4"),
        ("gpu-pool-3", "default/train-6"),
    ]


def test_a_bound_refusing_only_the_types_a_pods_size_leaves_does_not_last() -> None:
    # Two L4 types: 4 GPUs and 8 CPUs, 2 GPUs and 32 CPUs. train-0 (1 L4, 6 CPUs) opens
    # gpu-pool-1 over both. train-3 (2 L4s, 3 CPUs) finds only the 2-GPU type of gpu-pool-1
    # within its CPUs, one GPU left there: the count bound refuses it, on that type alone.
    # train-5 (2 L4s, 1 CPU), refused first by the full gpu-pool-2 (so validated when it comes
    # to gpu-pool-1), also fits the 4-GPU type of gpu-pool-1 and takes it: the bound refusing
    # train-3 did not last for pods of its claim spec.
    pods = [("L4", 1, 6), ("L4", 3, 5), ("L4", 2, 4), ("L4", 2, 3), ("L4", 1, 1), ("L4", 2, 1)]
    its = [("L4", 4, 8, ZONES), ("L4", 2, 32, ZONES)]
    docs = cluster([], its, [(*p, None, False) for p in pods], 0, False)
    fast = run(docs, True)
    assert fast == run(docs, False)
    placed = {p["pod"]: p["target"]["name"] for p in fast["pods"]}
    assert placed == {
        "default/train-0": "gpu-pool-1",
        "default/train-1": "gpu-pool-2",
        "default/train-2": "gpu-pool-3",
        "default/train-3": "gpu-pool-3",
        "default/train-4": "gpu-pool-1",
        "default/train-5": "gpu-pool-1",
    }
