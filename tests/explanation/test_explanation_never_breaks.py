"""An explanation never breaks a run.

Wording a refusal reads attribute values of every type (int, bool, string, version and their
lists); whatever the constraints (matchAttribute, distinctAttribute) and selectors a claim
carries, the run ends with a result, every failed pod explained, every funnel adding up.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from tests.allocator.test_funnel_properties import check_counts
from tests.contract.conftest import (
    claim_template,
    device_class,
    namespace,
    node,
    pod,
    request,
    resource_slice,
)

DRIVER = "gpu.nvidia.com"

# (attribute name, YAML type, values): one of each attribute type a driver may publish.
ATTRIBUTES = {
    "numaNode": ("int", [0, 1, 2]),
    "rdma": ("bool", [True, False]),
    "productName": ("string", ["NVIDIA H100 80GB HBM3", "NVIDIA L40S", "NVIDIA A10G"]),
    "driverVersion": ("version", ["535.104.5", "550.54.15", "560.28.3"]),
    "numaNodes": ("ints", [[0], [0, 1], [1]]),
    "pcieRoots": ("strings", [["pci0000:00"], ["pci0000:00", "pci0000:80"], ["pci0000:80"]]),
    "firmware": ("versions", [["1.0.0"], ["1.0.0", "2.1.0"], ["2.1.0"]]),
}
CEL = {
    "numaNode": 'device.attributes["gpu.nvidia.com"].numaNode == {v}',
    "rdma": 'device.attributes["gpu.nvidia.com"].rdma == {v}',
    "productName": 'device.attributes["gpu.nvidia.com"].productName == {v}',
    "driverVersion": (
        'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver({v}))'
    ),
}


def cel_literal(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


device_attrs = st.fixed_dictionaries(
    {name: st.sampled_from(range(len(values))) for name, (_, values) in ATTRIBUTES.items()}
)
constraint = st.tuples(
    st.sampled_from(["matchAttribute", "distinctAttribute"]), st.sampled_from(sorted(ATTRIBUTES))
)
selector = st.tuples(st.sampled_from(sorted(CEL)), st.integers(0, 2))
pod_spec = st.tuples(
    st.integers(1, 4),  # devices
    st.lists(constraint, max_size=2),
    st.lists(selector, max_size=2),
)


def pick(name: str, index: int):
    values = ATTRIBUTES[name][1]
    return values[index % len(values)]


def device(i: int, picks: dict[str, int]) -> dict:
    attributes = {}
    for name, (kind, values) in ATTRIBUTES.items():
        attributes[name] = {kind: values[picks[name]]}
    return {"name": f"gpu-{i}", "attributes": attributes}


def cluster(nodes: list[list[dict]], pods: list[tuple]) -> list[dict]:
    docs = [namespace("default"), device_class()]
    for n, devices in enumerate(nodes):
        name = f"ip-10-0-2-{n}.us-west-2.compute.internal"
        docs.append(
            node(
                name,
                cpu="96",
                memory="768Gi",
                labels={"node.kubernetes.io/instance-type": "p5.48xlarge"},
            )
        )
        docs.append(resource_slice(name, [device(i, d) for i, d in enumerate(devices)]))
    for j, (count, constraints, selectors) in enumerate(pods):
        selectors_json = [
            {"cel": {"expression": CEL[name].format(v=cel_literal(pick(name, index)))}}
            for name, index in selectors
        ]
        req = (
            request(count=count, selectors=selectors_json)
            if selectors_json
            else request(count=count)
        )
        template = claim_template(f"train-{j}", requests=[req])
        if constraints:
            template["spec"]["spec"]["devices"]["constraints"] = [
                {"requests": ["gpu"], kind: f"{DRIVER}/{attribute}"}
                for kind, attribute in constraints
            ]
        docs.append(template)
        docs.append(
            pod(
                f"train-{j}",
                created=f"2026-12-01T10:00:{j:02d}Z",
                claims=[{"name": "gpu", "resourceClaimTemplateName": f"train-{j}"}],
            )
        )
    return docs


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(st.lists(device_attrs, min_size=1, max_size=4), min_size=1, max_size=3),
    pods=st.lists(pod_spec, min_size=1, max_size=4),
    trace=st.booleans(),
)
def test_random_constraints_and_selectors_never_break_the_explanation(nodes, pods, trace):
    snapshot = load_files([("cluster.json", json.dumps(cluster(nodes, pods)))])
    out = simulate(snapshot, SimulationOptions(trace=trace))
    result = out.result
    for entry in result["pods"]:
        if entry["scheduled"]:
            continue
        assert entry["error"], entry["pod"]
        assert "internal error" not in entry["error"]
        for funnel in entry["explanation"]:
            check_counts(funnel)
    if trace:
        for n in out.trace["nodes"]:
            for funnel in n.get("funnel", ()):
                check_counts(funnel)


def test_distinct_versions_that_cannot_be_satisfied_are_worded() -> None:
    """Three devices asked to differ in driverVersion where only two versions exist: the pod
    fails with the values named (versions sorted as shown), not with an internal error."""
    picks = [{**{n: 0 for n in ATTRIBUTES}, "driverVersion": i % 2} for i in range(3)]
    docs = cluster([picks], [(3, [("distinctAttribute", "driverVersion")], [])])
    result = simulate(load_files([("c.json", json.dumps(docs))]), SimulationOptions()).result
    entry = result["pods"][0]
    assert not entry["scheduled"]
    assert "have only 2: 535.104.5, 550.54.15" in entry["error"]
    assert result["warnings"] == []


def test_words_that_fail_degrade_to_the_plain_reason_and_warn(monkeypatch) -> None:
    """A selector refusal whose words raise: the funnel shows the check's plain reason and the
    run's warnings say what could not be worded; the decision is the same."""
    from allocator.explanation import messages

    def broken(*args):
        raise ValueError("no words for this device")

    picks = [{n: 0 for n in ATTRIBUTES}] * 2
    docs = cluster([picks], [(1, [], [("productName", 1)])])
    before = simulate(load_files([("c.json", json.dumps(docs))]), SimulationOptions()).result
    monkeypatch.setitem(messages.EXPLAIN, "selector", broken)
    after = simulate(load_files([("c.json", json.dumps(docs))]), SimulationOptions()).result
    entry = after["pods"][0]
    assert not entry["scheduled"]
    assert entry["explanation"][0]["rejections"][0]["reason"] == "selector"
    assert any("could not be worded (ValueError" in w for w in after["warnings"])
    assert before["warnings"] == []
    assert [p["scheduled"] for p in before["pods"]] == [p["scheduled"] for p in after["pods"]]
