"""DaemonSet overhead and host ports, Karpenter's own tests title by title, through the whole
simulation: pkg/controllers/provisioning/suite_test.go Context("Daemonsets") and
pkg/controllers/provisioning/scheduling/suite_test.go "In-Flight Nodes" / "Existing Nodes"
Context("Daemonsets").

Karpenter's tests read the instance type of the node launched for the pod: 4 CPU / 4Gi
(``c6i.xlarge``) when the DaemonSet's overhead was counted, 2 CPU / 2Gi
(``c6i.large``) when it was not. Here that is the NodeClaim's cheapest instance type.

The fake cloud provider's ``size`` label (small / large) is a well-known label there (the fake
registers it); here well-known labels are Kubernetes' and Karpenter's, so the titles that
select DaemonSets by instance size select them by ``kubernetes.io/arch`` instead: the fake's
only large instance type is also its only arm64 one.

Ported: the provisioning suite's Context("Daemonsets") 21 of 21 (its two host port titles
moved here from test_karpenter_hostports.py); the scheduling suite's DaemonSet titles 4 of 5
("In-Flight Nodes" 3, "Existing Nodes" 1). "Should properly handle DaemonSet resources with
Node Affinity for karpenter.sh/initialized and karpenter.sh/registered" is ported as far as a
result shows it (the launched instance type, the NodeClaim's requirements); its cluster-state
checks (StateNode.DaemonSetRequests after manual binding) have no counterpart here.

Left out (3):
- provisioning suite "should create a nodeclaim with resource requests with daemon overhead"
  and "should not double-count daemon overhead when multiple pods are scheduled to the same
  nodeclaim": they read the NodeClaim's spec.resources.requests, which the result does not
  carry; ``test_nodeclaim_daemon_overhead_is_the_least_of_its_groups`` checks the overhead the
  scheduler keeps for it (Karpenter's addDaemonRequests).
- scheduling suite "should handle DaemonSet pods with DRA requirements based on
  IgnoreDRARequests flag value": the simulation is of a Karpenter with DRA support
  (IgnoreDRARequests false) only.

Not Karpenter's titles: ``test_an_existing_node_keeps_room_...`` (NewExistingNode's reservation
for DaemonSet pods a node does not run yet) and the overhead group tests at the end.
"""

from __future__ import annotations

import yaml

from allocator.scheduling.daemonsets import DaemonPods, daemon_pods, overhead_groups
from allocator.scheduling.fit import instance_type_info, node_pool_requirements
from allocator.scheduling.nodeclaim import least_overhead
from allocator.snapshot import load_files
from tests.scheduling.karpenter.kit import (
    INSTANCE_TYPE,
    ZONE,
    daemon_set,
    default_instance_types,
    launched_node,
    node_pool,
    pod_doc,
    provision,
    unschedulable_pod,
)

ARCH = "kubernetes.io/arch"
SMALL = [{"key": ARCH, "operator": "In", "values": ["amd64"]}]  # fake: size In [small]
LARGE = [{"key": ARCH, "operator": "In", "values": ["arm64"]}]  # fake: size In [large]


def _cpu_mem(cpu: str, memory: str) -> dict:
    return {"cpu": cpu, "memory": memory}


def _launched(result, pod) -> str:
    return result.launched(result.node_claim(pod))


def _pod_1cpu(**options) -> dict:
    return unschedulable_pod(requests=_cpu_mem("1", "1Gi"), **options)


# --- pkg/controllers/provisioning/suite_test.go Context("Daemonsets") -------------------------


def test_should_account_for_daemonsets():
    pod = _pod_1cpu()
    result = provision(
        node_pool(), *default_instance_types(), daemon_set(requests=_cpu_mem("2", "2Gi")), pod
    )
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_account_for_daemonset_hostports():
    ds = daemon_set(requests=_cpu_mem("2", "2Gi"), host_ports=(8080,))
    pod = _pod_1cpu(host_ports=(8080,))
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    # The host port is blocked by a compatible DaemonSet on every node a NodeClaim could become.
    assert not result.scheduled(pod)
    assert result.new_node_claims == []
    assert "checking host port usage" in result.error(pod)


def test_should_account_for_daemonsets_with_startup_taint():
    pool = node_pool(startup_taints=[{"key": "foo.com/taint", "effect": "NoSchedule"}])
    pod = _pod_1cpu()
    result = provision(
        pool, *default_instance_types(), daemon_set(requests=_cpu_mem("2", "2Gi")), pod
    )
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_not_schedule_if_daemonset_overhead_is_too_large():
    pod = unschedulable_pod()
    ds = daemon_set(requests=_cpu_mem("10000", "10000Gi"))
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    assert not result.scheduled(pod)


def test_should_account_for_overhead_using_daemonset_pod_spec_instead_of_daemonset_spec():
    ds = daemon_set("node-exporter", requests=_cpu_mem("4", "4Gi"))
    # The DaemonSet's own pod asks for less (a LimitRange or webhook changed it): it counts.
    ds_pod = unschedulable_pod(
        "node-exporter-x7k2p", requests=_cpu_mem("2", "2Gi"), daemon_set="node-exporter"
    )
    pod = _pod_1cpu(node_selector={"karpenter.sh/nodepool": "default"})
    result = provision(node_pool(), *default_instance_types(), ds, ds_pod, pod)
    assert _launched(result, pod) == "c6i.xlarge"
    assert not result.scheduled(ds_pod)  # the DaemonSet controller places it, not Karpenter


def test_should_not_schedule_if_resource_requests_are_not_defined_and_limits_requests_are_too_large():
    ds = daemon_set(requests={"cpu": "1"}, limits=_cpu_mem("10000", "10000Gi"))
    pod = unschedulable_pod()
    assert not provision(node_pool(), *default_instance_types(), ds, pod).scheduled(pod)


def test_should_schedule_based_on_the_max_resource_requests_of_containers_and_initcontainers():
    ds = daemon_set(
        requests={"cpu": "1"},
        limits=_cpu_mem("10000", "1Gi"),
        init_containers=[{"requests": {"cpu": "3"}, "limits": _cpu_mem("10000", "3Gi")}],
    )
    pod = unschedulable_pod()
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    # max(containers, init containers): 3 CPU and 3Gi of overhead; the 2 CPU type is too small.
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_not_schedule_if_combined_max_resources_are_too_large_for_any_node():
    ds = daemon_set(
        requests={"cpu": "1"},
        limits=_cpu_mem("10000", "1Gi"),
        init_containers=[{"requests": {"cpu": "1"}, "limits": _cpu_mem("10000", "10000Gi")}],
    )
    pod = unschedulable_pod()
    assert not provision(node_pool(), *default_instance_types(), ds, pod).scheduled(pod)


def test_should_not_schedule_if_initcontainer_resources_are_too_large():
    ds = daemon_set(init_containers=[{"requests": _cpu_mem("10000", "10000Gi")}])
    pod = unschedulable_pod()
    assert not provision(node_pool(), *default_instance_types(), ds, pod).scheduled(pod)


def test_should_be_able_to_schedule_pods_if_resource_requests_and_limits_are_not_defined():
    pod = unschedulable_pod()
    assert provision(node_pool(), *default_instance_types(), daemon_set(), pod).scheduled(pod)


def test_should_ignore_daemonsets_without_matching_tolerations():
    pool = node_pool(taints=[{"key": "foo", "value": "bar", "effect": "NoSchedule"}])
    pod = _pod_1cpu(tolerations=[{"operator": "Exists"}])
    result = provision(
        pool, *default_instance_types(), daemon_set(requests=_cpu_mem("2", "2Gi")), pod
    )
    assert _launched(result, pod) == "c6i.large"


def test_should_ignore_daemonsets_with_an_invalid_selector():
    ds = daemon_set(requests=_cpu_mem("2", "2Gi"), node_selector={"node": "invalid"})
    pod = _pod_1cpu()
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    assert _launched(result, pod) == "c6i.large"


def test_should_ignore_daemonsets_when_no_instance_types_meet_the_daemonset_requirements():
    ds = daemon_set(
        requests=_cpu_mem("2", "2Gi"),
        node_requirements=[
            {"key": INSTANCE_TYPE, "operator": "In", "values": ["non-existent-instance-type"]}
        ],
    )
    pod = _pod_1cpu()
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    # The NodePool allows any instance type, but none of them is the one the DaemonSet wants.
    assert _launched(result, pod) == "c6i.large"


def test_should_account_for_daemonsets_with_a_custom_label_nodeselector_that_matches_the_nodepool():
    pool = node_pool(labels={"purpose": "monitoring"})
    ds = daemon_set(requests=_cpu_mem("2", "2Gi"), node_selector={"purpose": "monitoring"})
    pod = _pod_1cpu()
    result = provision(pool, *default_instance_types(), ds, pod)
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_filter_out_daemonsets_based_on_instance_type_requirements():
    small = daemon_set("amd64-agent", requests={"cpu": "1"}, node_requirements=SMALL)
    large = daemon_set("arm64-agent", requests={"cpu": "10"}, node_requirements=LARGE)
    pod = _pod_1cpu()
    result = provision(node_pool(), *default_instance_types(), small, large, pod)
    # Only the 1 CPU DaemonSet runs on amd64 types: 2 CPU with the pod, on a 4 CPU type. Were
    # both counted on every type, only the 16 CPU arm64 type would hold them.
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_account_daemonsets_with_notin_operator_and_unspecified_key():
    ds = daemon_set(
        requests=_cpu_mem("2", "2Gi"),
        node_requirements=[{"key": "foo", "operator": "NotIn", "values": ["bar"]}],
    )
    pod = _pod_1cpu(node_requirements=[{"key": ZONE, "operator": "In", "values": ["us-west-2b"]}])
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_remove_daemonset_node_hostname_affinity_when_considering_daemonset_schedulability():
    pool = node_pool(labels={"foo": "bar"})
    wants_foo = [{"key": "foo", "operator": "In", "values": ["bar"]}]
    ds = daemon_set("log-shipper", requests=_cpu_mem("4", "4Gi"), node_requirements=wants_foo)
    # The DaemonSet's pod: pinned to its node, and asking for less (a LimitRange overrode it).
    ds_pod = pod_doc(
        "log-shipper-9zq4m",
        requests=_cpu_mem("2", "2Gi"),
        node_requirements=[{"key": "metadata.name", "operator": "In", "values": ["node-name"]}],
        daemon_set="log-shipper",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    )
    pod = _pod_1cpu(node_selector={"foo": "bar"})
    result = provision(pool, *default_instance_types(), ds, ds_pod, pod)
    # The pod's requests with the DaemonSet's affinity: 2 CPU + 1 CPU on a 4 CPU type.
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_consider_a_daemonset_schedulable_with_multiple_node_affinity_terms():
    pool = node_pool(labels={"foo": "bar"})
    ds = daemon_set(
        requests=_cpu_mem("2", "2Gi"),
        node_terms=[
            [{"key": "foo", "operator": "In", "values": ["voo"]}],
            [{"key": "foo", "operator": "In", "values": ["bar"]}],
        ],
    )
    pod = _pod_1cpu()
    result = provision(pool, *default_instance_types(), ds, pod)
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_consider_a_daemonset_schedulable_with_an_incompatible_node_affinity_preference():
    ds = daemon_set(
        requests=_cpu_mem("2", "2Gi"),
        node_preferences=[{"key": "node", "operator": "In", "values": ["invalid"]}],
    )
    pod = _pod_1cpu()
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_consider_a_daemonset_schedulable_with_a_prefernoschedule_taint():
    pool = node_pool(taints=[{"key": "test", "effect": "PreferNoSchedule"}])
    pod = _pod_1cpu()
    result = provision(
        pool, *default_instance_types(), daemon_set(requests=_cpu_mem("2", "2Gi")), pod
    )
    assert _launched(result, pod) == "c6i.xlarge"


def test_should_not_account_for_daemonset_hostports_when_daemonset_would_not_schedule_on_selected_node():
    large = daemon_set(
        "arm64-ingress", requests=_cpu_mem("4", "4Gi"), node_requirements=LARGE, host_ports=(8080,)
    )
    small = daemon_set(
        "amd64-ingress", requests=_cpu_mem("2", "2Gi"), node_requirements=SMALL, host_ports=(8081,)
    )
    pod = _pod_1cpu(node_requirements=SMALL, host_ports=(8080,))
    result = provision(node_pool(), *default_instance_types(), large, small, pod)
    # Port 8080 is held only on arm64 nodes; on amd64 the pod and its DaemonSet take 3 CPU.
    assert _launched(result, pod) == "c6i.xlarge"
    assert result.values(pod, ARCH) == {"amd64"}


# --- pkg/controllers/provisioning/scheduling/suite_test.go, In-Flight / Existing Nodes -------


def _node_16cpu(name: str = "ip-10-0-7-21") -> dict:
    """The 16 CPU node an 8 CPU pod launched in an earlier loop (the fake's arm64 type)."""
    return launched_node(name, "r7g.4xlarge", cpu="15900m", memory="131062Mi", pods="5")


def test_should_track_daemonset_usage_separately_so_we_know_how_many_ds_resources_are_remaining_to_be_scheduled():
    ds = daemon_set("node-exporter", requests=_cpu_mem("1", "1Gi"))
    # The DaemonSet's pod, bound to the node, asks for more memory than the DaemonSet says.
    ds_pod = pod_doc(
        "node-exporter-5v8sd",
        requests=_cpu_mem("1", "2Gi"),
        node_name="ip-10-0-7-21",
        daemon_set="node-exporter",
    )
    second = unschedulable_pod(limits={"cpu": "14.9"})
    result = provision(node_pool(), *default_instance_types(), ds, _node_16cpu(), ds_pod, second)
    # The DaemonSet's pod is there already: nothing more is kept for it, 14.9 CPU are free.
    assert result.target(second) == "ip-10-0-7-21"


def test_should_handle_unexpected_daemonset_pods_binding_to_the_node():
    labelled = daemon_set(
        "rack-agent", requests=_cpu_mem("1", "1Gi"), node_selector={"my-node-label": "value"}
    )
    tiny = daemon_set("tiny-agent", requests={"cpu": "1m"})
    node = _node_16cpu()
    node["metadata"]["labels"]["my-node-label"] = "value"  # a label Karpenter cannot track
    ds_pod = pod_doc(
        "rack-agent-l2m9x",
        requests=_cpu_mem("1", "2Gi"),
        node_selector={"my-node-label": "value"},
        node_name="ip-10-0-7-21",
        daemon_set="rack-agent",
    )
    second = unschedulable_pod(limits={"cpu": "15.5"})
    result = provision(node_pool(), *default_instance_types(), labelled, tiny, node, ds_pod, second)
    # 14.9 CPU are free, less 1m for the DaemonSet pod not on it yet: a new node is needed.
    assert result.target(second) != "ip-10-0-7-21"


def test_should_properly_handle_daemonset_resources_with_node_affinity_for_initialized_and_registered():
    initialized = daemon_set(
        "init-agent",
        requests={"cpu": "1"},
        node_requirements=[
            {"key": "karpenter.sh/initialized", "operator": "In", "values": ["true"]}
        ],
    )
    registered = daemon_set(
        "reg-agent",
        requests={"cpu": "1"},
        node_requirements=[
            {"key": "karpenter.sh/registered", "operator": "In", "values": ["true"]}
        ],
    )
    pod = unschedulable_pod(limits={"cpu": "2"})
    result = provision(node_pool(), *default_instance_types(), initialized, registered, pod)
    # Both DaemonSets run on a new node: 4 CPU with the pod, only the 16 CPU type holds them.
    assert _launched(result, pod) == "r7g.4xlarge"
    keys = {r["key"] for r in result.node_claim(pod)["requirements"]}
    assert not keys & {"karpenter.sh/initialized", "karpenter.sh/registered"}


def test_should_not_subtract_daemonset_overhead_that_is_not_strictly_compatible_with_an_existing_node():
    # A node of 1 CPU / 1Gi with no zone label; the DaemonSet wants us-west-2a.
    node = launched_node("ip-10-0-3-15", "c6i.large", cpu="1", memory="1Gi", pods="110")
    del node["metadata"]["labels"][ZONE]
    ds = daemon_set(
        requests=_cpu_mem("100", "100Gi"),
        node_requirements=[{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}],
    )
    pod = _pod_1cpu()
    result = provision(node_pool(), *default_instance_types(), ds, node, pod)
    assert result.target(pod) == "ip-10-0-3-15"
    # A second pod: the node is full, and the DaemonSet takes every node the NodePool could
    # launch (all of them may be in us-west-2a).
    first = pod_doc(
        pod["metadata"]["name"], requests=_cpu_mem("1", "1Gi"), node_name="ip-10-0-3-15"
    )
    pod2 = _pod_1cpu()
    result = provision(node_pool(), *default_instance_types(), ds, node, first, pod2)
    assert not result.scheduled(pod2)


def test_an_existing_node_keeps_room_for_the_daemonset_pods_it_does_not_run_yet():
    # A GPU node registered before the DCGM exporter DaemonSet was created: Karpenter keeps its
    # 2 CPU free for the exporter, so a 3 CPU pod does not fit the 4 CPU node.
    node = launched_node("ip-10-0-1-7", "c6i.xlarge", cpu="3900m", memory="4086Mi")
    ds = daemon_set("dcgm-exporter", requests=_cpu_mem("2", "1Gi"))
    pod = unschedulable_pod(requests={"cpu": "3"})
    result = provision(node_pool(limits={"cpu": "0"}), *default_instance_types(), ds, node, pod)
    assert not result.scheduled(pod)
    assert "exceeds node resources" in result.error(pod)


# --- the overhead groups themselves ----------------------------------------------------------


def _groups(*docs, pools=("default",)):
    """Each NodePool's overhead groups, NodePools asked in the order given (Karpenter's)."""
    snapshot = load_files([("s.yaml", yaml.safe_dump_all(list(docs)))])
    daemons = DaemonPods(daemon_pods(snapshot.daemon_sets, snapshot.pods))
    infos = [instance_type_info(it) for it in snapshot.instance_types.values()]
    out = {}
    for name in pools:
        pool = snapshot.node_pools[name]
        out[name] = overhead_groups(daemons, node_pool_requirements(pool), pool.taints, infos)
    return out


def test_instance_types_are_grouped_by_the_daemonsets_they_would_run():
    groups = _groups(
        node_pool(),
        *default_instance_types(),
        daemon_set("amd64-agent", requests={"cpu": "1"}, node_requirements=SMALL),
        daemon_set("arm64-agent", requests={"cpu": "10"}, node_requirements=LARGE),
    )["default"]
    assert len(groups) == 2
    arm64 = next(g for g in groups if "r7g.4xlarge" in g.instance_types)
    amd64 = next(g for g in groups if "c6i.xlarge" in g.instance_types)
    assert arm64.instance_types == {"r7g.4xlarge"}
    assert (arm64.overhead["cpu"], amd64.overhead["cpu"]) == (10_000, 1_000)
    assert len(amd64.instance_types) == 5


def test_nodeclaim_daemon_overhead_is_the_least_of_its_groups():
    groups = _groups(
        node_pool(),
        *default_instance_types(),
        daemon_set("amd64-agent", requests=_cpu_mem("1", "2Gi"), node_requirements=SMALL),
        daemon_set("arm64-agent", requests=_cpu_mem("10", "1Gi"), node_requirements=LARGE),
    )["default"]
    # Karpenter's addDaemonRequests: per resource, the least of the groups still possible.
    both = least_overhead(groups, ["c6i.large", "r7g.4xlarge"])
    assert (both["cpu"], both["memory"]) == (1_000, 2**30 * 1000)
    assert least_overhead(groups, ["r7g.4xlarge"])["cpu"] == 10_000


def test_a_dropped_affinity_term_stays_dropped_for_later_nodepools():
    # Karpenter drops the first term from the DaemonSet pod itself: once an instance type of
    # the first NodePool made it drop [foo In voo], the NodePool labelled foo=voo asked next no
    # longer runs the DaemonSet.
    ds = daemon_set(
        requests={"cpu": "2"},
        node_terms=[
            [{"key": "foo", "operator": "In", "values": ["voo"]}],
            [{"key": "foo", "operator": "In", "values": ["bar"]}],
        ],
    )
    bar, voo = node_pool("bar", labels={"foo": "bar"}), node_pool("voo", labels={"foo": "voo"})
    groups = _groups(bar, voo, *default_instance_types(), ds, pools=("bar", "voo"))
    assert [bool(g.daemons) for g in groups["bar"]] == [True]
    assert [bool(g.daemons) for g in groups["voo"]] == [False]
    # Asked the other way round, the first term still stands for the NodePool labelled voo.
    groups = _groups(bar, voo, *default_instance_types(), ds, pools=("voo", "bar"))
    assert [bool(g.daemons) for g in groups["voo"]] == [True]
    assert [bool(g.daemons) for g in groups["bar"]] == [True]
