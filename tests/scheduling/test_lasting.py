"""The existing nodes that refused a pod shape for good (``LastingRefusals``): attempts
without words pass over them, with the same placements, reasons and errors as asking every
node again."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.scheduling.existingnode import ExistingNode
from allocator.scheduling.lasting import MAX_SHAPES, LastingRefusals
from tests.scheduling.k8s import (
    device_class,
    gpu,
    node,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)


class Node:
    def __init__(self, name: str) -> None:
        self.id = f"node/{name}"


def _plain(self, shape, nodes):
    return nodes  # every node asked, as without the memo


def _stable(result: dict) -> dict:
    result["stats"].pop("seconds", None)
    result["stats"].pop("suggestionSeconds", None)
    return result


# --- LastingRefusals -------------------------------------------------------------------------


def test_a_shape_not_refused_yet_asks_every_node_of_the_run():
    nodes = [Node("cpu-a"), Node("cpu-b")]
    assert LastingRefusals().left(("web",), nodes) is nodes


def test_nodes_refused_for_good_are_left_out_in_order():
    nodes = [Node(f"cpu-{i}") for i in range(5)]
    lasting = LastingRefusals()
    lasting.refused(("web",), nodes, nodes[1])
    lasting.refused(("web",), nodes, nodes[3])
    assert [n.id for n in lasting.left(("web",), nodes)] == [
        "node/cpu-0",
        "node/cpu-2",
        "node/cpu-4",
    ]
    lasting.refused(("web",), nodes, nodes[0])
    assert [n.id for n in lasting.left(("web",), nodes)] == ["node/cpu-2", "node/cpu-4"]
    # Another shape, and the run's nodes themselves, are untouched.
    assert lasting.left(("batch",), nodes) is nodes
    assert len(nodes) == 5


def test_a_refusal_over_another_node_list_is_not_used():
    nodes = [Node("cpu-0"), Node("cpu-1")]
    narrowed = nodes[1:]  # a trial's narrowed list is not the run's
    lasting = LastingRefusals()
    lasting.refused(("web",), nodes, nodes[1])
    assert lasting.left(("web",), narrowed) is narrowed
    lasting.clear()
    assert lasting.left(("web",), nodes) is nodes


def test_the_shapes_remembered_are_bounded():
    nodes = [Node("cpu-0")]
    lasting = LastingRefusals()
    for i in range(MAX_SHAPES + 1):
        lasting.refused((f"shape-{i}",), nodes, nodes[0])
    assert len(lasting._by_shape) <= MAX_SHAPES
    assert lasting.left((f"shape-{MAX_SHAPES}",), nodes) == []


# --- in the loop -----------------------------------------------------------------------------


def _web_cluster(pods: int, *, failing: bool = False) -> list[dict]:
    docs = [
        node(
            f"{group}-{i}",
            instance_type="m7i.xlarge",
            cpu="4",
            memory="16Gi",
            labels={"workload": group},
        )
        for group, count in (("batch", 17), ("web", 3))
        for i in range(count)
    ]
    docs += [
        pod(
            f"web-{i}",
            cpu="1",
            memory="1Gi",
            node_selector={"workload": "web"},
            created=f"2026-12-01T10:00:{i:02d}Z",
        )
        for i in range(pods)
    ]
    if failing:
        docs.append(
            pod(
                "web-big",
                cpu="64",
                node_selector={"workload": "web"},
                created="2026-12-01T10:01:00Z",
            )
        )
    return docs


def test_web_pods_selecting_a_node_group_ask_the_other_nodes_once():
    asked = []
    can_add = ExistingNode.can_add

    def counting(self, *args, **kwargs):
        asked.append(self.name)
        return can_add(self, *args, **kwargs)

    with mock.patch.object(ExistingNode, "can_add", counting):
        result = run(_web_cluster(12))
    # The first pod (with words) and the second (without, remembering) ask the 17 batch
    # nodes; the ten after them only the web nodes left.
    assert asked.count("batch-0") == 2
    assert len(asked) < 2 * 20 + 10 * 3
    placed = [pod_result(result, f"default/web-{i}")["target"]["name"] for i in range(12)]
    assert placed == ["web-0"] * 4 + ["web-1"] * 4 + ["web-2"] * 4


def test_a_pod_that_fails_names_every_node_and_the_memo_changes_nothing():
    with_memo = _stable(run(_web_cluster(6, failing=True)))
    with mock.patch.object(LastingRefusals, "left", _plain):
        plain = _stable(run(_web_cluster(6, failing=True)))
    assert with_memo == plain
    big = pod_result(with_memo, "default/web-big")
    assert not big["scheduled"]
    assert sum(r.get("targets", 1) for r in big["reasons"]) == 20


def spread_over_zones(doc: dict, app: str) -> dict:
    """The pod, labelled ``app`` and spread with the others of it over zones (max skew 1)."""
    doc["metadata"]["labels"] = {"app": app}
    doc["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
        }
    ]
    return doc


@st.composite
def clusters(draw):
    docs = [device_class(), template("one-gpu", [request("gpu")])]
    for i in range(draw(st.integers(1, 6))):
        name = f"node-{i}"
        docs.append(
            node(
                name,
                instance_type="g6.4xlarge",
                zone=draw(st.sampled_from(["us-west-2a", "us-west-2b"])),
                cpu=str(draw(st.integers(1, 6))),
                memory="32Gi",
                labels={"workload": draw(st.sampled_from(["web", "batch"]))},
                taints=draw(
                    st.sampled_from(
                        [None, [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]]
                    )
                ),
                unschedulable=draw(st.booleans()) and draw(st.booleans()),
            )
        )
        gpus = draw(st.integers(0, 2))
        if gpus:
            docs.append(
                resource_slice(
                    f"{name}-gpus", node=name, owner=name, devices=[gpu(g) for g in range(gpus)]
                )
            )
    for i in range(draw(st.integers(1, 10))):
        shape = draw(st.integers(0, 4))  # pods of a Deployment share a shape
        doc = pod(
            f"app-{i}",
            cpu=["1", "2", "1", "3", "1"][shape],
            node_selector=[None, {"workload": "web"}, {"workload": "batch"}, None, None][shape],
            tolerations=[
                None,
                None,
                [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                None,
                None,
            ][shape],
            templates={"gpu": "one-gpu"} if shape == 3 else None,
            created=f"2026-12-01T10:00:{i:02d}Z",
        )
        if shape == 4:  # spread over zones: a zone refuses while ahead, then takes pods again
            spread_over_zones(doc, "spread")
        docs.append(doc)
    return docs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_passing_over_lasting_refusals_decides_as_asking_every_node(docs):
    with_memo = _stable(run(docs))
    with mock.patch.object(LastingRefusals, "left", _plain):
        plain = _stable(run(docs))
    assert with_memo == plain


def test_a_zone_that_refused_a_spread_pod_takes_the_next_one():
    # A topology's refusal is not for good: once the other zone caught up, the node in the
    # zone ahead takes the next replica again.
    docs = [
        node("web-a", zone="us-west-2a", instance_type="m7i.xlarge", cpu="8", memory="32Gi"),
        node("web-b", zone="us-west-2b", instance_type="m7i.xlarge", cpu="8", memory="32Gi"),
    ]
    for i in range(4):
        docs.append(
            spread_over_zones(pod(f"web-{i}", cpu="1", created=f"2026-12-01T10:00:{i:02d}Z"), "web")
        )
    result = run(docs)
    placed = [pod_result(result, f"default/web-{i}")["target"]["name"] for i in range(4)]
    assert placed == ["web-a", "web-b", "web-a", "web-b"]
