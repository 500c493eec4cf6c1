"""Random small clusters: the loop never crashes, the document validates, and its invariants
hold (every pending pod once, NodeClaims hold exactly their pods, no device given twice)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scheduling.k8s import (
    GPU,
    claim,
    device_class,
    gpu,
    instance_type,
    node,
    node_pool,
    offering,
    pod,
    request,
    resource_slice,
    run,
    template,
)

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "allocator" / "result_schema.json").read_text()
)
ZONES = ["us-west-2a", "us-west-2b"]


@st.composite
def clusters(draw):
    docs = [
        device_class(),
        template("one", [request("gpu")]),
        template("two", [request("gpus", count=2)]),
    ]
    n_nodes = draw(st.integers(0, 3))
    for n in range(n_nodes):
        name = f"gpu-node-{n}"
        gpus = draw(st.integers(0, 3))
        docs.append(
            node(
                name,
                zone=draw(st.sampled_from(ZONES)),
                cpu=str(draw(st.integers(2, 16))),
                memory="64Gi",
                pool=draw(st.sampled_from([None, "gpu"])),
                initialized=draw(st.booleans()),
            )
        )
        if gpus:
            docs.append(
                resource_slice(
                    f"{name}-gpus", node=name, owner=name, devices=[gpu(i) for i in range(gpus)]
                )
            )
            if draw(st.booleans()):
                docs.append(
                    claim(
                        f"{name}-held",
                        [request("gpu")],
                        allocated=[("gpu", GPU, name, "gpu-0")],
                        reserved_for=[f"{name}-runner"],
                    )
                )
                docs.append(
                    pod(
                        f"{name}-runner",
                        node_name=name,
                        claims={"gpu": f"{name}-held"},
                        deleting=draw(st.booleans()),
                    )
                )
    if draw(st.booleans()):
        docs.append(
            node_pool("gpu", requirements=[], limits={"cpu": str(draw(st.integers(8, 64)))})
        )
        for size in draw(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3, unique=True)):
            docs.append(
                instance_type(
                    f"g6.{size}xlarge",
                    family="g6",
                    cpu=str(4 * size),
                    memory=f"{16 * size}Gi",
                    gpus=size,
                    model="NVIDIA L4",
                    offerings=[
                        offering(z, 0.8 * size)
                        for z in draw(st.lists(st.sampled_from(ZONES), min_size=1, unique=True))
                    ],
                )
            )
    if draw(st.booleans()):
        docs.append(claim("shared", [request("gpu")]))
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["plain", "one", "two", "shared"]))
        kwargs = {"cpu": str(draw(st.integers(1, 8))), "uid": f"u{i}"}
        if kind in ("one", "two"):
            kwargs["templates"] = {"gpu": kind}
        elif kind == "shared" and any(
            d["metadata"]["name"] == "shared" for d in docs if d["kind"] == "ResourceClaim"
        ):
            kwargs["claims"] = {"gpu": "shared"}
        if draw(st.booleans()):
            kwargs["node_selector"] = {"topology.kubernetes.io/zone": draw(st.sampled_from(ZONES))}
        docs.append(pod(f"job-{i}", **kwargs))
    return docs


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=clusters())
def test_random_clusters(docs):
    result = run(docs)
    jsonschema.validate(result, SCHEMA)
    pending = [p["pod"] for p in result["pods"]]
    assert len(pending) == len(set(pending))
    placed = {p["pod"]: p for p in result["pods"] if p["scheduled"]}
    for nc in result["nodeClaims"]:
        assert nc["pods"] and all(placed[k]["target"]["name"] == nc["name"] for k in nc["pods"])
    # An in-cluster device is never handed to two different claims.
    owners: dict[tuple, str] = {}
    for p in placed.values():
        for c in p["claims"]:
            for d in c["devices"]:
                if d["source"] == "in-cluster" and not d.get("adminAccess"):
                    key = (d["driver"], d["pool"], d["device"])
                    assert owners.setdefault(key, c["claim"]) == c["claim"]
    # Template devices are NodeClaim-local: one claim per (NodeClaim, instance type, device).
    template_owner: dict[tuple, str] = {}
    for p in placed.values():
        for c in p["claims"]:
            for d in c["devices"]:
                if d["source"] == "template":
                    key = (p["target"]["name"], d["instanceType"], d["pool"], d["device"])
                    assert template_owner.setdefault(key, c["claim"]) == c["claim"]
    stats = result["stats"]
    assert stats["scheduled"] + stats["failed"] == stats["pods"] == len(pending)
