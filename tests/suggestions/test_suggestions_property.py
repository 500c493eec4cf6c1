"""End to end: a suggestion applied to the snapshot itself places the pod where it said.

Generated clusters: an optional GPU node (some devices tainted, some held by a running pod,
maybe a node taint), an optional GPU NodePool (instance families, taint, cpu limit) and a
catalog of p5.48xlarge / p4d.24xlarge / g5.xlarge, with one pending pod asking for 1..10 GPUs,
maybe a productName selector, an arch node selector, a toleration. The pending pod is the only
one, so "where" is well-defined: the re-run creates NodeClaims under the same names as the trial
(``<nodepool>-1``) and an existing node is named as it is. Every suggestion of the failed pod is
applied to the raw documents (``apply_change``), the snapshot simulated again, and the pod must
be placed on exactly the suggested target.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.suggestions import apply_suggestion
from tests.scheduling.k8s import (
    GPU,
    claim,
    device_class,
    families,
    gpu,
    instance_type,
    node,
    node_pool,
    offering,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)

MODELS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
DEVICE_TAINT = {"key": "nvidia.com/ecc-errors", "value": "true", "effect": "NoSchedule"}
POOL_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def rarely(draw) -> bool:
    """True one time in four: each problem alone is common, all of them at once rare."""
    return draw(st.integers(0, 3)) == 0


@st.composite
def clusters(draw) -> list[dict]:
    docs: list[dict] = [device_class(GPU)]
    if not rarely(draw):
        devices = []
        for i in range(draw(st.integers(0, 3))):
            device = gpu(i, draw(st.sampled_from(MODELS)))
            if rarely(draw):
                device["taints"] = [DEVICE_TAINT]
            devices.append(device)
        node_taints = [POOL_TAINT] if rarely(draw) else None
        docs += [
            node("gpu-node-1", cpu="64", memory="512Gi", taints=node_taints),
            resource_slice("gpu-node-1-gpus", node="gpu-node-1", devices=devices),
        ]
        if devices and rarely(draw):
            docs += [
                claim(
                    "old-job-gpu",
                    [request("gpu")],
                    allocated=[("gpu", GPU, "gpu-node-1", devices[0]["name"])],
                    reserved_for=["old-job-0"],
                ),
                pod("old-job-0", cpu="16", node_name="gpu-node-1", claims={"gpu": "old-job-gpu"}),
            ]
    if not rarely(draw):
        fams = draw(st.sampled_from([["p5"], ["g5"], ["p5", "g5"], ["p4d", "g5"]]))
        docs.append(
            node_pool(
                "gpu-pool",
                requirements=families(*fams),
                taints=[POOL_TAINT] if rarely(draw) else None,
                limits={"cpu": "100"} if rarely(draw) else None,
            )
        )
    docs += [
        instance_type("p5.48xlarge", gpus=8, offerings=[offering("us-west-2a", 98.32)]),
        instance_type(
            "p4d.24xlarge",
            cpu="96",
            memory="1152Gi",
            gpus=8,
            model=MODELS[1],
            offerings=[offering("us-west-2a", 32.77)],
        ),
        instance_type(
            "g5.xlarge",
            cpu="4",
            memory="16Gi",
            gpus=1,
            model="NVIDIA A10G",
            offerings=[offering("us-west-2a", 1.006)],
        ),
    ]
    model = draw(st.sampled_from([None, None, MODELS[0], "NVIDIA B200"]))
    selectors = [f'device.attributes["{GPU}"].productName == "{model}"'] if model else []
    docs.append(
        template(
            "train-gpu",
            [
                request(
                    "gpu", count=draw(st.sampled_from([1, 1, 2, 3, 4, 8, 10])), selectors=selectors
                )
            ],
        )
    )
    docs.append(
        pod(
            "train-0",
            cpu=draw(st.sampled_from(["2", "2", "8", "120"])),
            memory="8Gi",
            templates={"gpu": "train-gpu"},
            node_selector={"kubernetes.io/arch": "arm64"} if rarely(draw) else None,
            tolerations=[{**POOL_TAINT, "operator": "Equal"}] if rarely(draw) else None,
        )
    )
    return docs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_a_suggested_change_applied_to_the_snapshot_places_the_pod_where_it_said(docs):
    entry = pod_result(run(docs), "default/train-0")
    if entry["scheduled"]:
        assert entry["suggestions"] == []
        return
    for suggestion in entry["suggestions"]:
        again = pod_result(
            run(apply_suggestion(docs, suggestion), suggestions=False), "default/train-0"
        )
        assert again["scheduled"], (suggestion, again["error"])
        assert again["target"] == suggestion["target"], suggestion


@st.composite
def busy_clusters(draw) -> list[dict]:
    """The clusters above with more pending pods competing for the same GPUs and nodes: an
    inference pod asking for 1..2 GPUs and a CPU-only web pod, created before or after the
    training pod (so that queue order decides who gets what)."""
    docs = draw(clusters())
    docs.append(template("serve-gpu", [request("gpu", count=draw(st.sampled_from([1, 2])))]))
    for name, templates, created in (
        ("serve-0", {"gpu": "serve-gpu"}, draw(st.sampled_from(["09:00", "11:00"]))),
        ("web-0", None, "10:30"),
    ):
        docs.append(
            pod(
                name,
                cpu=draw(st.sampled_from(["1", "16", "64"])),
                memory="8Gi",
                templates=templates,
                created=f"2026-12-01T{created}:00Z",
            )
        )
    return docs


def placements(result: dict) -> dict:
    return {e["pod"]: e["target"] for e in result["pods"]}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_clusters())
def test_every_suggestion_applied_with_other_pods_pending_places_the_pod_as_affects_says(docs):
    """With several pending pods the whole loop decides: the suggested change, applied to the
    snapshot, places the pod where the suggestion says, and every other pod whose target
    changes is listed in ``affects`` (NodeClaim names aside: a new one earlier renumbers)."""
    before = run(docs)
    for entry in before["pods"]:
        for suggestion in entry["suggestions"]:
            again = run(apply_suggestion(docs, suggestion), suggestions=False)
            mine = pod_result(again, entry["pod"])
            assert mine["scheduled"], (suggestion, mine["error"])
            assert mine["target"] == suggestion["target"], suggestion
            assert suggestion["affects"] is not None  # small runs are always re-run
            listed = {a["pod"]: a["to"] for a in suggestion["affects"]}
            was, now = placements(before), placements(again)
            for key, target in now.items():
                if key == entry["pod"] or key not in was:
                    continue
                moved = (target is None) != (was[key] is None) or (
                    target is not None and not target["new"] and target != was[key]
                )
                if moved:
                    assert listed.get(key, "absent") == target, (key, suggestion)


@st.composite
def clusters_with_big_requests(draw) -> list[dict]:
    """The busy clusters with the training pod asking for more memory or cpu than any
    instance type has, now and then."""
    docs = draw(busy_clusters())
    train = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "train-0")
    requests = train["spec"]["containers"][0]["resources"]["requests"]
    requests["memory"] = draw(st.sampled_from(["8Gi", "8Gi", "3000Gi"]))
    if rarely(draw):
        requests["cpu"] = "500"
    return docs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters_with_big_requests())
def test_the_fast_paths_offer_exactly_what_the_plain_search_offers(docs):
    """Skipping device-side changes for a pod no target refused over devices (and freeing
    devices for one too large for every existing node), and probing a request down from the
    largest node instead of bisecting, change no suggestion."""
    import pytest

    from allocator.suggestions import core

    fast = run(docs)
    with pytest.MonkeyPatch.context() as plain:
        plain.setattr(core, "_devices_refused", lambda outcome: True)
        plain.setattr(core, "_fits_a_node_when_empty", lambda ctx, pod: True)
        plain.setattr(core, "_largest_from_top", core._largest_count)
        slow = run(docs)
    for a, b in zip(fast["pods"], slow["pods"], strict=True):
        assert a["suggestions"] == b["suggestions"], a["pod"]


@st.composite
def crowded_clusters(draw) -> list[dict]:
    """The busy clusters with more GPU nodes (each with its own GPUs, some held by running pods
    of their own, some tainted) and a second NodePool of another family, now and then
    tainted or at its cpu limit: freeing devices, widening or raising one NodePool each reach
    some targets and not others."""
    docs = draw(busy_clusters())
    for n in range(2, 2 + draw(st.integers(1, 3))):
        name = f"ip-10-0-{n}-7.us-west-2.compute.internal"
        devices = [gpu(i, draw(st.sampled_from(MODELS))) for i in range(draw(st.integers(1, 4)))]
        docs += [
            node(name, cpu="64", memory="512Gi", taints=[POOL_TAINT] if rarely(draw) else None),
            resource_slice(f"{name}-gpus", node=name, devices=devices),
        ]
        for i, device in enumerate(devices):
            if draw(st.booleans()):
                docs += [
                    claim(
                        f"infer-{n}-{i}-gpu",
                        [request("gpu")],
                        allocated=[("gpu", GPU, name, device["name"])],
                        reserved_for=[f"infer-{n}-{i}"],
                    ),
                    pod(
                        f"infer-{n}-{i}",
                        cpu="4",
                        node_name=name,
                        claims={"gpu": f"infer-{n}-{i}-gpu"},
                    ),
                ]
    if not rarely(draw):
        docs.append(
            node_pool(
                "g5-pool",
                requirements=families("g5"),
                taints=[POOL_TAINT] if rarely(draw) else None,
                limits={"cpu": draw(st.sampled_from(["0", "4", "64"]))},
            )
        )
    return docs


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded_clusters())
def test_a_trial_of_only_the_targets_its_change_reaches_offers_what_a_trial_of_all_offers(docs):
    """A trial that asks only the targets its change reaches (the nodes whose devices a
    deletion frees, the new NodeClaims of the NodePool it widens or raises, the NodeClaims
    and NodePools with room for a lowered count or for the count of a wider selector) offers
    every pod exactly the suggestions a trial asking every target offers."""
    import pytest

    from allocator.suggestions import core

    narrow = run(docs)
    with pytest.MonkeyPatch.context() as plain:
        plain.setattr(core, "_refused_everywhere", lambda ctx, outcome: False)
        whole = run(docs)
    for a, b in zip(narrow["pods"], whole["pods"], strict=True):
        assert a["suggestions"] == b["suggestions"], a["pod"]
    assert narrow["stats"]["suggestionTrials"] == whole["stats"]["suggestionTrials"]
