"""Reading a pod's topology fields (allocator/snapshot/affinity.py): labels, pod affinity and
anti-affinity, preferred node affinity, topology spread constraints, and the problems
kube-apiserver would have refused them for."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from allocator.model import (
    LabelSelector,
    LabelSelectorRequirement,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from allocator.snapshot import SnapshotError, load_files

VLLM = """
apiVersion: v1
kind: Pod
metadata:
  name: vllm-0
  namespace: inference
  labels: {app: vllm, pod-template-hash: 6d4f9}
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.6.3
    resources: {limits: {nvidia.com/gpu: 1}}
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        preference:
          matchExpressions:
          - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 20
        podAffinityTerm:
          topologyKey: topology.kubernetes.io/zone
          labelSelector: {matchLabels: {app: kv-cache}}
          namespaceSelector: {matchLabels: {tier: prod}}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchExpressions: [{key: app, operator: In, values: [vllm]}]
        namespaces: [inference, canary]
        matchLabelKeys: [pod-template-hash]
        mismatchLabelKeys: [tenant]
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {app: vllm}}
    minDomains: 3
    nodeAffinityPolicy: Ignore
    nodeTaintsPolicy: Honor
    matchLabelKeys: [pod-template-hash]
"""


def load_pod(text: str = VLLM):
    (pod,) = load_files([("vllm.yaml", text)]).pods
    return pod


def problems(mutate) -> list[str]:
    doc = yaml.safe_load(VLLM)
    mutate(doc)
    with pytest.raises(SnapshotError) as err:
        load_files([("vllm.yaml", yaml.safe_dump(doc))])
    return err.value.problems


def test_every_topology_field_is_read():
    pod = load_pod()
    assert pod.labels == {"app": "vllm", "pod-template-hash": "6d4f9"}
    assert pod.preferred_node_affinity == (
        PreferredSchedulingTerm(
            50,
            {
                "matchExpressions": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ]
            },
        ),
    )
    assert pod.pod_affinity == PodAffinity(
        preferred=(
            WeightedPodAffinityTerm(
                20,
                PodAffinityTerm(
                    "topology.kubernetes.io/zone",
                    LabelSelector((("app", "kv-cache"),)),
                    namespace_selector=LabelSelector((("tier", "prod"),)),
                ),
            ),
        )
    )
    assert pod.pod_anti_affinity == PodAffinity(
        required=(
            PodAffinityTerm(
                "kubernetes.io/hostname",
                LabelSelector(
                    match_expressions=(LabelSelectorRequirement("app", "In", ("vllm",)),)
                ),
                namespaces=("inference", "canary"),
                match_label_keys=("pod-template-hash",),
                mismatch_label_keys=("tenant",),
            ),
        )
    )
    assert pod.topology_spread_constraints == (
        TopologySpreadConstraint(
            1,
            "topology.kubernetes.io/zone",
            "DoNotSchedule",
            LabelSelector((("app", "vllm"),)),
            min_domains=3,
            node_affinity_policy="Ignore",
            node_taints_policy="Honor",
            match_label_keys=("pod-template-hash",),
        ),
    )


def test_a_pod_without_topology_reads_as_empty():
    pod = load_pod(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: train-0}\nspec: {containers: [{name: c}]}\n"
    )
    assert pod.labels == {}
    assert pod.pod_affinity is None and pod.pod_anti_affinity is None
    assert pod.preferred_node_affinity == () and pod.topology_spread_constraints == ()


def test_a_relaxed_copy_is_a_replace_with_fewer_terms():
    pod = load_pod()
    relaxed = dataclasses.replace(pod, pod_affinity=PodAffinity(), preferred_node_affinity=())
    assert relaxed.pod_anti_affinity is pod.pod_anti_affinity
    assert pod.pod_affinity.preferred and not relaxed.pod_affinity.preferred


AFF = "spec.affinity"
ANTI = f"{AFF}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
PREF = f"{AFF}.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
TSC = "spec.topologySpreadConstraints[0]"
WHERE = "vllm.yaml doc 1 Pod inference/vllm-0"


def _set(path: list, value):
    def mutate(doc):
        target = doc
        for step in path[:-1]:
            target = target[step]
        if value is None:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return mutate


_ANTI_PATH = [
    "spec",
    "affinity",
    "podAntiAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    0,
]
_PREF_PATH = [
    "spec",
    "affinity",
    "podAffinity",
    "preferredDuringSchedulingIgnoredDuringExecution",
    0,
]
_TSC_PATH = ["spec", "topologySpreadConstraints", 0]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set([*_ANTI_PATH, "topologyKey"], None), f"{ANTI}.topologyKey: required"),
        (
            _set([*_ANTI_PATH, "topologyKey"], "zone/"),
            f"{ANTI}.topologyKey: invalid label key 'zone/'",
        ),
        (
            _set(
                [*_ANTI_PATH, "labelSelector"],
                {"matchExpressions": [{"key": "app", "operator": "In"}]},
            ),
            f"{ANTI}.labelSelector.matchExpressions[0].values: must not be empty for operator In",
        ),
        (
            _set(
                [*_ANTI_PATH, "labelSelector"],
                {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]},
            ),
            f"{ANTI}.labelSelector.matchExpressions[0].values: must be empty for operator Exists",
        ),
        (
            _set(
                [*_ANTI_PATH, "labelSelector"],
                {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]},
            ),
            f"{ANTI}.labelSelector.matchExpressions[0].operator: must be one of In, NotIn, "
            "Exists, DoesNotExist",
        ),
        (
            # Karpenter's "should not spread an invalid label selector" value.
            _set(
                [*_ANTI_PATH, "labelSelector"],
                {"matchLabels": {"app.kubernetes.io/name": "{{ zqfmgb }}"}},
            ),
            f"{ANTI}.labelSelector.matchLabels.app.kubernetes.io/name: invalid label value",
        ),
        (_set([*_ANTI_PATH, "namespaces"], "inference"), f"{ANTI}.namespaces: must be a list"),
        (_set([*_PREF_PATH, "weight"], 0), f"{PREF}.weight: must be an integer >= 1"),
        (_set([*_PREF_PATH, "weight"], 101), f"{PREF}.weight: must be in the range 1-100"),
        (_set([*_PREF_PATH, "weight"], None), f"{PREF}.weight: required"),
        (_set([*_PREF_PATH, "podAffinityTerm"], None), f"{PREF}.podAffinityTerm: required"),
        (
            _set(["spec", "affinity", "podAffinity"], []),
            f"{AFF}.podAffinity: must be an object, not a list",
        ),
        (
            _set(
                [
                    "spec",
                    "affinity",
                    "nodeAffinity",
                    "preferredDuringSchedulingIgnoredDuringExecution",
                    0,
                    "preference",
                ],
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": []}]},
            ),
            f"{AFF}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference."
            "matchExpressions[0].values: must not be empty for operator In",
        ),
        (_set([*_TSC_PATH, "maxSkew"], 0), f"{TSC}.maxSkew: must be an integer >= 1"),
        (_set([*_TSC_PATH, "maxSkew"], None), f"{TSC}.maxSkew: required"),
        (_set([*_TSC_PATH, "topologyKey"], None), f"{TSC}.topologyKey: required"),
        (
            _set([*_TSC_PATH, "whenUnsatisfiable"], "Sometimes"),
            f"{TSC}.whenUnsatisfiable: must be one of DoNotSchedule, ScheduleAnyway",
        ),
        (_set([*_TSC_PATH, "minDomains"], 0), f"{TSC}.minDomains: must be an integer >= 1"),
        (
            _set([*_TSC_PATH, "whenUnsatisfiable"], "ScheduleAnyway"),
            f"{TSC}.minDomains: can only be set when whenUnsatisfiable is DoNotSchedule",
        ),
        (
            _set([*_TSC_PATH, "nodeTaintsPolicy"], "honor"),
            f"{TSC}.nodeTaintsPolicy: must be one of Honor, Ignore",
        ),
        (
            _set([*_TSC_PATH, "labelSelector"], None),
            f"{TSC}.matchLabelKeys: must not be set when labelSelector is not set",
        ),
        (
            _set(["metadata", "labels"], {"app": 3}),
            "metadata.labels.app: must be a string, not a number",
        ),
    ],
)
def test_problems_name_the_field(mutate, expected):
    found = problems(mutate)
    assert len(found) == 1, found
    assert found[0].startswith(f"{WHERE}: {expected}"), found[0]
