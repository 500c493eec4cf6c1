"""Warnings for what changes scheduling but is not simulated (allocator/snapshot/unsimulated.py)."""

from __future__ import annotations

import copy
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.cli import main
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_documents, load_files
from allocator.snapshot.unsimulated import FIELDS, KINDS, MAX_EXAMPLES, field_warnings, kind_row

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "ip-10-0-1-23.us-west-2.compute.internal",
        "labels": {"topology.kubernetes.io/zone": "us-west-2a"},
    },
    "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110"}},
}


def pod(name: str = "train-0", namespace: str = "ml-training", **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {"requests": {"cpu": "4", "memory": "16Gi"}},
                }
            ],
            **spec,
        },
    }


def node_pool(**spec) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {
                            "key": "karpenter.k8s.aws/instance-family",
                            "operator": "In",
                            "values": ["p5", "p4d"],
                        }
                    ],
                }
            },
            **spec,
        },
    }


SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "trainer"}},
    }
]
AFFINITY_TERM = [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "trainer"}}}
]


def _min_values() -> dict:
    pool = node_pool()
    pool["spec"]["template"]["spec"]["requirements"][0]["minValues"] = 2
    return pool


# One realistic object per row of the table: the row's field set, nothing else.
EXAMPLES = {
    "spec.priorityClassName": lambda: pod(priorityClassName="training-high"),
}

# Fields the simulation honours (topology, preferences, NodePool minValues and the nodes
# limit): none of them is reported as not simulated.
SIMULATED = {
    "spec.topologySpreadConstraints": lambda: pod(topologySpreadConstraints=SPREAD),
    "spec.affinity.podAffinity": lambda: pod(
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": AFFINITY_TERM}}
    ),
    "spec.affinity.podAntiAffinity": lambda: pod(
        affinity={
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": AFFINITY_TERM}
        }
    ),
    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": lambda: pod(
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": ["us-west-2a"],
                                }
                            ]
                        },
                    }
                ]
            }
        }
    ),
    "spec.template.spec.requirements[].minValues": _min_values,
    "spec.limits.nodes": lambda: node_pool(limits={"cpu": "1000", "nodes": "10"}),
}


@pytest.mark.parametrize("field", SIMULATED)
def test_fields_the_simulation_honours_give_no_warning(field):
    obj = SIMULATED[field]()
    assert field_warnings([(obj["kind"], obj)]) == []


def test_every_row_has_an_example_and_a_reason():
    assert set(EXAMPLES) == {row.field for row in FIELDS}
    assert len({(row.kind, row.field) for row in FIELDS}) == len(FIELDS)
    for row in (*FIELDS, *KINDS):
        assert row.why and not row.why.endswith(".")


@pytest.mark.parametrize("row", FIELDS, ids=lambda row: row.field)
def test_each_row_warns_once_naming_its_field_the_object_and_why(row):
    obj = EXAMPLES[row.field]()
    warnings = field_warnings([(obj["kind"], obj)])
    assert len(warnings) == 1
    (warning,) = warnings
    assert warning.startswith(f"not simulated: {row.kind} {row.field} on 1 ")
    ident = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
    assert (ident if row.kind == "Pod" else obj["metadata"]["name"]) in warning
    assert warning.endswith(row.why)


def test_objects_without_those_fields_give_no_warning():
    docs = [("Pod", pod()), ("NodePool", node_pool(limits={"cpu": "1000"})), ("Node", NODE)]
    assert field_warnings(docs) == []


def test_one_warning_per_field_with_a_count_and_a_few_examples():
    pods = [pod(f"train-{i}", priorityClassName="training-high") for i in range(7)]
    (warning,) = field_warnings([("Pod", p) for p in pods])
    assert (
        "on 7 pending pods (ml-training/train-0, ml-training/train-1, ml-training/train-2 and 4 more)"
        in warning
    )
    assert warning.count("ml-training/") == MAX_EXAMPLES


def test_pod_rows_that_concern_only_the_pod_itself_skip_bound_pods():
    bound = pod(
        "web-0",
        "shop",
        nodeName="ip-10-0-1-23.us-west-2.compute.internal",
        priorityClassName="training-high",
    )
    # A running pod's priority changes nothing for the pods still to be placed.
    assert field_warnings([("Pod", bound)]) == []
    pending = pod("web-1", "shop", priorityClassName="training-high")
    (warning,) = field_warnings([("Pod", bound), ("Pod", pending)])
    assert "priorityClassName on 1 pending pod (shop/web-1)" in warning


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("policy/v1", "PodDisruptionBudget"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
        ("node.k8s.io/v1", "RuntimeClass"),
    ],
)
def test_kinds_that_change_scheduling_are_skipped_with_one_warning_saying_why(api_version, kind):
    docs = [NODE] + [
        {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": f"obj-{i}", "namespace": "ml-training"},
        }
        for i in range(5)
    ]
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    assert snapshot.object_counts() == {"Node": 1}
    (warning,) = [w for w in snapshot.warnings if kind in w]
    assert warning.startswith(f"not simulated: 5 {kind}s (ml-training/obj-0, ")
    assert "and 2 more) skipped: " + kind_row(kind, api_version.rpartition("/")[0]).why in warning
    assert "unknown kind" not in warning


def test_a_kind_of_the_table_under_a_foreign_group_stays_an_unknown_kind():
    docs = [
        NODE,
        {"apiVersion": "example.com/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}},
    ]
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    (warning,) = snapshot.warnings
    assert "unknown kind RuntimeClass (example.com/v1), skipped" in warning


def test_stored_documents_give_the_same_field_warnings_and_no_kind_ones():
    docs = [
        NODE,
        pod(priorityClassName="training-high"),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "trainer", "namespace": "ml-training"},
        },
    ]
    first = load_files([("cluster.json", json.dumps(docs))])
    again = load_documents(first.documents)
    assert again.unsimulated == first.unsimulated != []
    assert [w for w in first.warnings if "PodDisruptionBudget" in w]
    assert again.warnings == []  # the skipped kinds' warnings travel with the stored snapshot


def test_the_result_and_the_command_line_report_them(tmp_path):
    docs = [NODE, pod(priorityClassName="training-high")]
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    result = simulate(snapshot, SimulationOptions(suggestions=False)).result
    assert result["warnings"] == snapshot.unsimulated
    assert "spec.priorityClassName on 1 pending pod (ml-training/train-0)" in result["warnings"][0]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(docs))
    out, err = io.StringIO(), io.StringIO()
    assert main(["simulate", str(path), "--json"], stdout=out, stderr=err) == 0
    assert "warning: not simulated: Pod spec.priorityClassName" in err.getvalue()
    assert json.loads(out.getvalue())["warnings"] == result["warnings"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["Pod", "NodePool"]), _json, st.sampled_from(sorted(EXAMPLES)))
def test_odd_shapes_never_fail_a_warning(kind, junk, field):
    # Any value at any place the rows read: warnings are words, they never fail a load.
    obj = copy.deepcopy(EXAMPLES[field]())
    obj["spec"] = junk if not isinstance(junk, dict) else {**obj["spec"], **junk}
    field_warnings([(kind, obj), (kind, junk)])
