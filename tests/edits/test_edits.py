"""allocator/edits.py: a suggestion's change as an RFC 6902 patch, the manifest after it, and
whether the object must be recreated (and through which workload)."""

from __future__ import annotations

import copy

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.edits import (
    EditError,
    annotate,
    annotate_all,
    apply_edits,
    edit_for,
    field_steps,
    index_documents,
    pointer,
    set_ops,
)


def gpu_pod(name="train-0", ns="ml-training", **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.10-py3"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100-x8"}],
            **spec,
        },
    }


def claim_template(name="h100-x8", ns="ml-training") -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "count": 8,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": 'device.attributes["gpu.nvidia.com"]'
                                            '.productName == "NVIDIA H100 80GB HBM3"'
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }


def node_pool() -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu-h100"},
        "spec": {
            "limits": {"cpu": "384", "nvidia.com/gpu": "16"},
            "template": {
                "spec": {
                    "requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["p5.48xlarge"],
                        },
                    ]
                }
            },
        },
    }


def index(*docs: dict) -> dict:
    return index_documents([(d["kind"], d) for d in docs])


def test_field_paths_become_json_pointers_with_real_indices_and_escapes():
    assert field_steps("spec.spec.devices.requests[0].exactly.count") == [
        "spec",
        "spec",
        "devices",
        "requests",
        0,
        "exactly",
        "count",
    ]
    assert pointer(["metadata", "labels", "resource.kubernetes.io/admin-access"]) == (
        "/metadata/labels/resource.kubernetes.io~1admin-access"
    )
    assert pointer(["a~b"]) == "/a~0b"
    with pytest.raises(EditError):
        field_steps("spec..x")


def test_an_empty_node_selector_is_a_real_removal():
    pod = gpu_pod(nodeSelector={"topology.kubernetes.io/region": "eu-west-1"})
    edit = edit_for(
        {
            "object": "Pod ml-training/train-0",
            "field": "spec.nodeSelector",
            "op": "set",
            "value": {},
        },
        index(pod),
    )
    assert edit.patch == [{"op": "remove", "path": "/spec/nodeSelector"}]
    assert "nodeSelector" not in edit.manifest["spec"]
    assert edit.recreate  # a pod's nodeSelector cannot change in place
    assert pod["spec"]["nodeSelector"]  # the snapshot's object is left as it was


def test_a_count_in_a_list_item_is_replaced_at_its_index():
    t = claim_template()
    edit = edit_for(
        {
            "object": "ResourceClaimTemplate ml-training/h100-x8",
            "field": "spec.spec.devices.requests[0].exactly.count",
            "op": "set",
            "value": 4,
        },
        index(t, gpu_pod()),
    )
    assert edit.patch == [
        {"op": "replace", "path": "/spec/spec/devices/requests/0/exactly/count", "value": 4}
    ]
    assert edit.manifest["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 4
    # The template's spec is immutable and the pod's claim was made from it: both recreated.
    assert edit.recreate
    assert edit.workload == "Pod ml-training/train-0"
    assert any(
        "kubectl delete resourceclaimtemplate -n ml-training h100-x8" in s for s in edit.steps
    )


def test_added_tolerations_are_appended_and_keep_the_pod_in_place():
    pod = gpu_pod(
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    )
    added = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    edit = edit_for(
        {
            "object": "Pod ml-training/train-0",
            "field": "spec.tolerations",
            "op": "set",
            "value": [*pod["spec"]["tolerations"], added],
        },
        index(pod),
    )
    assert edit.patch == [{"op": "add", "path": "/spec/tolerations/1", "value": added}]
    assert edit.recreate is False


def test_a_missing_field_is_added_at_its_first_missing_step():
    pod = gpu_pod()
    added = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    edit = edit_for(
        {
            "object": "Pod ml-training/train-0",
            "field": "spec.tolerations",
            "op": "set",
            "value": added,
        },
        index(pod),
    )
    assert edit.patch == [{"op": "add", "path": "/spec/tolerations", "value": added}]
    ns = edit_for(
        {
            "object": "Namespace inference",
            "field": "metadata.labels",
            "op": "set",
            "value": {"a": "b"},
        },
        index(),
    )
    assert ns.patch == [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    assert ns.manifest["metadata"] == {"name": "inference", "labels": {"a": "b"}}


def test_one_dropped_requirement_is_one_removal():
    pool = node_pool()
    kept = pool["spec"]["template"]["spec"]["requirements"][:1]
    edit = edit_for(
        {
            "object": "NodePool gpu-h100",
            "field": "spec.template.spec.requirements",
            "op": "set",
            "value": kept,
        },
        index(pool),
    )
    assert edit.patch == [{"op": "remove", "path": "/spec/template/spec/requirements/1"}]
    assert edit.recreate is False


@pytest.mark.parametrize(
    ("owner", "labels", "extra", "workload", "says"),
    [
        (
            {"kind": "ReplicaSet", "name": "llama-train-7d9f8c6b5", "controller": True},
            {"pod-template-hash": "7d9f8c6b5"},
            [],
            "Deployment ml-training/llama-train",
            "kubectl patch deployment -n ml-training llama-train --type json",
        ),
        (
            {"kind": "ReplicaSet", "name": "vllm-5c8d", "controller": True},
            {},
            [
                {
                    "kind": "ReplicaSet",
                    "metadata": {
                        "name": "vllm-5c8d",
                        "namespace": "ml-training",
                        "ownerReferences": [
                            {"kind": "Deployment", "name": "vllm", "controller": True}
                        ],
                    },
                }
            ],
            "Deployment ml-training/vllm",
            "kubectl patch deployment -n ml-training vllm",
        ),
        (
            {"kind": "StatefulSet", "name": "etcd", "controller": True},
            {},
            [],
            "StatefulSet ml-training/etcd",
            "kubectl delete pod -n ml-training train-0",
        ),
        (
            {"kind": "Job", "name": "resnet-epoch-12", "controller": True},
            {},
            [],
            "Job ml-training/resnet-epoch-12",
            "kubectl replace --force -f job.yaml",
        ),
        (None, {}, [], None, "kubectl replace --force -f pod.yaml"),
    ],
)
def test_an_immutable_pod_field_names_the_workload_that_recreates_the_pod(
    owner, labels, extra, workload, says
):
    pod = gpu_pod(nodeSelector={"topology.kubernetes.io/zone": "us-west-2a"})
    if owner:
        pod["metadata"]["ownerReferences"] = [owner]
    pod["metadata"]["labels"] = labels
    edit = edit_for(
        {
            "object": "Pod ml-training/train-0",
            "field": "spec.nodeSelector",
            "op": "set",
            "value": None,
        },
        index(pod, *extra),
    )
    assert edit.recreate
    assert edit.workload == workload
    assert any(says in step for step in edit.steps), edit.steps
    if workload and workload.startswith("Deployment"):
        assert '"path":"/spec/template/spec/nodeSelector"' in edit.steps[0]


def test_a_two_change_suggestion_patches_each_change_in_turn():
    pod = gpu_pod()
    suggestion = {
        "kind": "tolerate-taint",
        "change": {
            "object": "Pod ml-training/train-0",
            "field": "spec.tolerations",
            "op": "set",
            "value": [{"key": "a", "operator": "Exists"}],
        },
        "changes": [
            {
                "object": "Pod ml-training/train-0",
                "field": "spec.tolerations",
                "op": "set",
                "value": [{"key": "a", "operator": "Exists"}],
            },
            {
                "object": "Pod ml-training/train-0",
                "field": "spec.tolerations",
                "op": "set",
                "value": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
            },
        ],
    }
    annotate(suggestion, index(pod))
    first, second = suggestion["changes"]
    assert first["patch"] == [
        {"op": "add", "path": "/spec/tolerations", "value": [{"key": "a", "operator": "Exists"}]}
    ]
    # The second starts from the first's manifest: only the new toleration is added.
    assert second["patch"] == [
        {"op": "add", "path": "/spec/tolerations/1", "value": {"key": "b", "operator": "Exists"}}
    ]
    assert len(second["manifest"]["spec"]["tolerations"]) == 2
    assert suggestion["patch"] == first["patch"]


def test_a_delete_has_no_patch_and_a_bad_field_keeps_the_suggestion():
    s = {
        "kind": "free-device",
        "change": {
            "object": "Pod default/holder",
            "op": "delete",
            "objects": ["Pod default/holder"],
        },
    }
    annotate(s, index())
    assert s["patch"] is None and s["manifest"] is None
    bad = {
        "kind": "reduce-count",
        "change": {"object": "Pod default/gone", "field": "spec.x", "op": "set", "value": 1},
    }
    annotate(bad, index())
    assert bad["patch"] is None and "not in the snapshot" in bad["patchError"]


def test_what_if_edits_apply_in_order_and_name_the_one_that_fails():
    docs = [("NodePool", node_pool()), ("Pod", gpu_pod())]
    out = apply_edits(
        docs,
        [
            {
                "object": "NodePool gpu-h100",
                "patch": [{"op": "replace", "path": "/spec/limits/cpu", "value": "768"}],
            }
        ],
    )
    assert out[0][1]["spec"]["limits"]["cpu"] == "768"
    assert docs[0][1]["spec"]["limits"]["cpu"] == "384"
    with pytest.raises(EditError, match=r"edits\[1\] \(NodePool gpu-h100\): patch does not apply"):
        apply_edits(
            docs,
            [
                {"object": "Pod ml-training/train-0", "patch": []},
                {"object": "NodePool gpu-h100", "patch": [{"op": "remove", "path": "/spec/nope"}]},
            ],
        )
    with pytest.raises(EditError, match="not in the snapshot"):
        apply_edits(docs, [{"object": "NodePool cpu", "patch": []}])
    with pytest.raises(EditError, match="may not rename"):
        apply_edits(
            docs,
            [
                {
                    "object": "NodePool gpu-h100",
                    "patch": [{"op": "replace", "path": "/metadata/name", "value": "x"}],
                }
            ],
        )


def test_deleting_a_pod_releases_the_claim_it_alone_reserved():
    claim = {
        "kind": "ResourceClaim",
        "metadata": {"name": "holder-gpu", "namespace": "default"},
        "spec": {},
        "status": {
            "allocation": {"devices": {"results": []}},
            "reservedFor": [{"resource": "pods", "name": "holder"}],
        },
    }
    holder = gpu_pod("holder", "default")
    out = apply_edits(
        [("Pod", holder), ("ResourceClaim", claim)],
        [{"object": "Pod default/holder", "delete": True}],
    )
    assert [k for k, _ in out] == ["ResourceClaim"]
    assert "allocation" not in out[0][1]["status"]


# --- property: the patch writes exactly the value at the field ---------------------------------

keys = st.sampled_from(["spec", "limits", "nodeSelector", "example.com/zone", "a~b"])
leaf = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.just({}), st.just([]))
values = st.recursive(
    leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def doc_and_path(draw):
    doc = draw(st.dictionaries(keys, values, min_size=1, max_size=4))
    steps: list = []
    node = doc
    while True:
        if isinstance(node, dict):
            step = draw(keys)
        elif isinstance(node, list):
            step = draw(st.integers(0, len(node)))
        else:
            break
        steps.append(step)
        if not (
            (isinstance(node, dict) and step in node)
            or (isinstance(node, list) and step < len(node))
        ):
            break
        node = node[step]
        if draw(st.booleans()):
            break
    return doc, steps


def read(doc, steps):
    for s in steps:
        doc = doc[s]
    return doc


@given(doc_and_path(), values)
def test_the_patch_applied_by_jsonpatch_sets_the_value(case, value):
    doc, steps = case
    before = copy.deepcopy(doc)
    try:
        ops = set_ops(doc, steps, value)
    except EditError:
        return  # a path through a scalar or past a list's end: refused, never a wrong patch
    after = jsonpatch.apply_patch(doc, ops)
    assert doc == before
    if value in (None, {}, []):
        try:
            parent = read(after, steps[:-1])
        except (KeyError, IndexError, TypeError):
            return  # the path never existed: nothing to remove
        assert (
            not isinstance(parent, dict)
            or steps[-1] not in parent
            or parent[steps[-1]] in (None, {}, [])
        )
    else:
        assert read(after, steps) == value
    assert all(op["op"] in ("add", "remove", "replace") for op in ops)


def test_a_template_many_pods_use_names_five_of_them_in_its_recreate_steps():
    """A ResourceClaimTemplate used by 40 training pods: the steps name five pods and say the
    same goes for the 35 others, so the suggestion stays small whatever the workload's size."""
    docs = [
        (
            "ResourceClaimTemplate",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "h100-x1", "namespace": "ml-training"},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1},
                                }
                            ]
                        }
                    }
                },
            },
        ),
        *(
            (
                "Pod",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"train-{i}", "namespace": "ml-training"},
                    "spec": {
                        "containers": [{"name": "main", "image": "pytorch:2.5"}],
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100-x1"}],
                    },
                },
            )
            for i in range(40)
        ),
    ]
    suggestion = {
        "change": {
            "object": "ResourceClaimTemplate ml-training/h100-x1",
            "field": "spec.spec.devices.requests[0].exactly.count",
            "op": "set",
            "value": 2,
        }
    }
    annotate_all([[suggestion]], docs)
    assert suggestion["recreate"] is True
    steps = suggestion["recreateSteps"]
    assert sum("kubectl replace --force" in step for step in steps) == 5
    assert steps[-1].startswith("the same for the 35 other pods that use it")


def test_replicas_with_one_change_share_one_edit_and_each_gets_its_patch(monkeypatch):
    # Forty failed replicas all suggest raising the NodePool's limits: the edit is worked
    # out once, and every replica's suggestion carries the same patch and manifest.
    from allocator import edits

    worked_out = []
    edit = edits._edit_for

    def counting(change, index):
        worked_out.append(change["object"])
        return edit(change, index)

    monkeypatch.setattr(edits, "_edit_for", counting)
    raise_limits = {
        "object": "NodePool gpu-h100",
        "field": "spec.limits",
        "op": "set",
        "value": {"cpu": "512", "nvidia.com/gpu": "24"},
    }
    by_pod = [[{"kind": "nodepool-limit", "change": dict(raise_limits)}] for _ in range(40)]
    annotate_all(by_pod, [("NodePool", node_pool())])
    assert worked_out == ["NodePool gpu-h100"]
    patches = [found[0]["patch"] for found in by_pod]
    assert patches == [patches[0]] * 40
    assert {"op": "replace", "path": "/spec/limits/cpu", "value": "512"} in patches[0]
    assert all(found[0]["manifest"]["spec"]["limits"]["nvidia.com/gpu"] == "24" for found in by_pod)
    # Another value is another edit.
    other = [[{"kind": "nodepool-limit", "change": {**raise_limits, "value": {"cpu": "768"}}}]]
    annotate_all(by_pod[:1] + other, [("NodePool", node_pool())])
    assert other[0][0]["manifest"]["spec"]["limits"] == {"cpu": "768"}
