"""Typed snapshot objects shared by every part of the allocator.

The loader (``allocator.snapshot``) builds these from raw Kubernetes documents. Every object
keeps its ``raw`` dict: it is the source of truth for fields the allocator does not model
(clusters run newer API versions than any tool), and for showing objects back to users.

Identity types are NamedTuples because they are hashed in the DFS inner loop.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, NamedTuple

from allocator.quantity import Quantity
from allocator.records import record

# Kubernetes caps allocation results at this many devices per claim (AllocationResultsMaxSize).
ALLOCATION_RESULTS_MAX_SIZE = 32


class PoolKey(NamedTuple):
    driver: str
    pool: str


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    @property
    def pool_key(self) -> PoolKey:
        return PoolKey(self.driver, self.pool)

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


# --- attribute values ------------------------------------------------------------------------


# An attribute value as Python sees it: bool, int, str, or a Version (semver string) for the
# ``version`` type; list-typed attributes (DRAListTypeAttributes) are tuples of those.
@record(frozen=True)
class Version:
    """A ``version``-typed device attribute (semantic version), compared as semver by CEL."""

    value: str  # semantic version, as published (no leading "v")

    def __str__(self) -> str:
        return self.value


AttributeValue = bool | int | str | Version | tuple


# --- ResourceSlice ---------------------------------------------------------------------------


@record
class DeviceTaint:
    """A device's taint (resource.k8s.io DeviceTaint), published or from a DeviceTaintRule."""

    key: str
    value: str | None
    effect: str  # NoSchedule | NoExecute | None
    time_added: str | None = None


@record
class CounterConsumption:
    """What a device draws from a shared counter set (``consumesCounters``)."""

    counter_set: str
    counters: dict[str, Quantity]
    compatibility_groups: tuple[str, ...] = ()


@record
class CounterSet:
    """A slice's shared counters (``sharedCounters``) that devices draw from."""

    name: str
    counters: dict[str, Quantity]


@record
class RequestPolicy:
    """How a consumable capacity may be requested (``requestPolicy``: default, values, range)."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range_min: Quantity | None = None
    valid_range_max: Quantity | None = None
    valid_range_step: Quantity | None = None


@record
class DeviceCapacity:
    """One capacity of a device: its value and, when consumable, its request policy."""

    value: Quantity
    request_policy: RequestPolicy | None = None


@record
class Device:
    """One device of a ResourceSlice (v1 shape; v1beta1's ``basic:`` is unwrapped on load)."""

    name: str
    # Keys exactly as published: "model" (driver's domain) or "domain.example.com/model".
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = field(default_factory=dict)
    # Per-device node accessibility (DRAPartitionableDevices lets devices carry their own).
    node_name: str | None = None
    node_selector: dict | None = None  # raw v1.NodeSelector
    all_nodes: bool | None = None
    consumes_counters: list[CounterConsumption] = field(default_factory=list)
    taints: list[DeviceTaint] = field(default_factory=list)
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    allow_multiple_allocations: bool = False
    raw: dict = field(default_factory=dict)


@record
class ResourceSlice:
    """A ResourceSlice: one driver's devices of one pool, and where they are reachable."""

    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str | None = None
    node_selector: dict | None = None  # raw v1.NodeSelector (terms ORed)
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: list[Device] = field(default_factory=list)
    shared_counters: list[CounterSet] = field(default_factory=list)
    owner_node: str | None = None  # metadata.ownerReferences entry of Kind=Node, if any
    raw: dict = field(default_factory=dict)

    @property
    def pool_key(self) -> PoolKey:
        return PoolKey(self.driver, self.pool)


# --- DeviceClass / ResourceClaim -------------------------------------------------------------


@record
class DeviceSelector:
    """One selector of a DeviceClass or request: a CEL expression."""

    cel: str | None  # None: a selector of a kind other than CEL (rejected by validation)
    raw: dict = field(default_factory=dict)


@record
class DeviceClass:
    """A DeviceClass: selectors every request of the class adds, and its extended resource."""

    name: str
    selectors: list[DeviceSelector] = field(default_factory=list)
    extended_resource_name: str | None = None
    raw: dict = field(default_factory=dict)


@record
class DeviceToleration:
    """A request's toleration of device taints."""

    key: str | None = None
    operator: str = "Equal"  # Equal | Exists
    value: str | None = None
    effect: str | None = None  # None: any effect
    toleration_seconds: int | None = None


@record
class CapacityRequirements:
    """What a request asks of a device's consumable capacity (``capacity.requests``)."""

    requests: dict[str, Quantity] = field(default_factory=dict)


@record
class ExactDeviceRequest:
    """The body of ``exactly`` (or of one ``firstAvailable`` entry, a subrequest)."""

    device_class_name: str
    selectors: list[DeviceSelector] = field(default_factory=list)
    allocation_mode: str = "ExactCount"  # ExactCount | All
    count: int = 1
    admin_access: bool = False
    tolerations: list[DeviceToleration] = field(default_factory=list)
    capacity: CapacityRequirements | None = None


@record
class DeviceSubRequest:
    """One ``firstAvailable`` alternative of a request, named ``<request>/<sub>``."""

    name: str
    request: ExactDeviceRequest


@record
class DeviceRequest:
    """A claim's request: ``exactly`` one shape, or ``firstAvailable`` alternatives."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = field(default_factory=list)


@record
class DeviceConstraint:
    """A claim's constraint across requests: matchAttribute or distinctAttribute."""

    requests: list[str] = field(default_factory=list)  # empty: all requests of the claim
    match_attribute: str | None = None
    distinct_attribute: str | None = None
    raw: dict = field(default_factory=dict)


@record
class DeviceRequestAllocationResult:
    """One allocated device of a claim (``status.allocation.devices.results``)."""

    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    tolerations: list[DeviceToleration] = field(default_factory=list)
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = None
    consumed_capacity: dict[str, Quantity] = field(default_factory=dict)

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@record
class AllocationResult:
    """``status.allocation`` of a ResourceClaim."""

    devices: list[DeviceRequestAllocationResult] = field(default_factory=list)
    node_selector: dict | None = None  # raw v1.NodeSelector


@record
class ConsumerReference:
    """Who a claim is reserved for (``status.reservedFor``): a pod, by name and UID."""

    resource: str  # "pods" for pods
    name: str
    uid: str | None = None
    api_group: str = ""


@record
class ResourceClaimSpec:
    """What a claim asks for: requests, constraints and opaque config."""

    requests: list[DeviceRequest] = field(default_factory=list)
    constraints: list[DeviceConstraint] = field(default_factory=list)
    config: list[dict] = field(default_factory=list)


@record
class ResourceClaim:
    """A ResourceClaim, from the cluster or generated from a pod's template."""

    namespace: str
    name: str
    spec: ResourceClaimSpec
    allocation: AllocationResult | None = None
    reserved_for: list[ConsumerReference] = field(default_factory=list)
    # status.devices[] entries (conditions per device), raw, for binding failure detection.
    device_statuses: list[dict] = field(default_factory=list)
    generated_from_template: str | None = None  # set for claims the simulator generated
    raw: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@record
class ResourceClaimTemplate:
    """A ResourceClaimTemplate: the spec a pod's generated claim gets."""

    namespace: str
    name: str
    spec: ResourceClaimSpec
    raw: dict = field(default_factory=dict)


@record
class DeviceTaintRule:
    """A DeviceTaintRule: a taint put on the devices its selector names."""

    name: str
    taint: DeviceTaint
    device_class_name: str | None = None
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    raw: dict = field(default_factory=dict)


# --- core/v1 ---------------------------------------------------------------------------------


@record
class Namespace:
    """A Namespace: its labels, read by namespace selectors."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    raw: dict = field(default_factory=dict)


@record
class Taint:
    """A node's taint."""

    key: str
    value: str | None
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@record
class Toleration:
    """A pod's toleration of node taints."""

    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


@record
class Node:
    """A Node: labels, allocatable resources, taints and whether it takes pods."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, Quantity] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    deleting: bool = False  # metadata.deletionTimestamp set
    unschedulable: bool = False
    declared_features: tuple[str, ...] | None = None  # status.declaredFeatures; None: not reported
    raw: dict = field(default_factory=dict)


@record(frozen=True)
class OwnerReference:
    """A pod's owner (``metadata.ownerReferences``): tells DaemonSet pods and IsOwnedBy."""

    kind: str
    name: str
    api_version: str = ""
    uid: str = ""
    controller: bool = False


@record(frozen=True)
class PodVolume:
    """A volume of a pod backed by a PersistentVolumeClaim (other volume kinds are not kept:
    Karpenter reads nothing from them)."""

    name: str  # spec.volumes[].name
    claim_name: str  # persistentVolumeClaim.claimName, or "<pod>-<volume>" for an ephemeral one
    ephemeral: bool = False
    # The ephemeral volume's claim template storage class (shown to users; Karpenter reads the
    # claim the ephemeral volume controller creates, never the template).
    template_storage_class: str | None = None


@record(frozen=True)
class ContainerHostPort:
    """A container port with a hostPort (API defaulting applied: protocol TCP)."""

    host_port: int
    protocol: str = "TCP"
    host_ip: str = ""  # as written; "" means every address (0.0.0.0)
    container: str = ""


@record(frozen=True)
class PodCondition:
    """One of a pod's ``status.conditions`` (PodScheduled tells a pending pod)."""

    type: str
    status: str = ""
    reason: str = ""
    message: str = ""


@record
class PodResourceClaim:
    """A pod's claim entry: a claim by name, or a template to generate one from."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


# --- pod topology: affinity, anti-affinity, spread (read by scheduling/topology.py) --------
#
# Frozen so that a pod relaxed by preferences is ``dataclasses.replace(pod, ...)`` with fewer
# terms, sharing the rest.


@record(frozen=True)
class LabelSelectorRequirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@record(frozen=True)
class LabelSelector:
    """A metav1.LabelSelector (an empty one selects everything; a pod term without one, None,
    selects nothing)."""

    match_labels: tuple[tuple[str, str], ...] = ()  # as written
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for expr in self.match_expressions:
            value = labels.get(expr.key)
            op = expr.operator
            if op == "In":
                if value is None or value not in expr.values:
                    return False
            elif op == "NotIn":
                if value is not None and value in expr.values:
                    return False
            elif op == "Exists":
                if value is None:
                    return False
            elif op == "DoesNotExist":
                if value is not None:
                    return False
            else:
                return False
        return True


@record(frozen=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term: the pods it selects and the topology key it counts by."""

    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@record(frozen=True)
class WeightedPodAffinityTerm:
    """A preferred pod (anti-)affinity term with its weight."""

    weight: int
    term: PodAffinityTerm


@record(frozen=True)
class PodAffinity:
    """``spec.affinity.podAffinity`` or ``podAntiAffinity``."""

    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@record(frozen=True)
class PreferredSchedulingTerm:
    """A preferred node affinity term with its weight."""

    weight: int
    preference: dict  # raw NodeSelectorTerm (validated on load)


@record(frozen=True)
class TopologySpreadConstraint:
    """A pod's topology spread constraint."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None  # Honor | Ignore; None: unset (Honor)
    node_taints_policy: str | None = None  # Honor | Ignore; None: unset (Ignore)
    match_label_keys: tuple[str, ...] = ()


@record
class Pod:
    """A Pod: what the scheduler reads of it (requests, claims, affinity, spread, volumes)."""

    namespace: str
    name: str
    uid: str
    node_name: str | None = None
    creation_timestamp: str = ""
    deleting: bool = False  # metadata.deletionTimestamp set
    owner_kinds: tuple[str, ...] = ()  # metadata.ownerReferences[].kind ("DaemonSet" ...)
    # Sum of containers (max with init containers), plus overhead, as the scheduler computes.
    requests: dict[str, Quantity] = field(default_factory=dict)
    container_count: int = 1
    node_selector: dict[str, str] = field(default_factory=dict)
    required_node_affinity: dict | None = None  # raw NodeSelector of requiredDuringScheduling...
    tolerations: list[Toleration] = field(default_factory=list)
    resource_claims: list[PodResourceClaim] = field(default_factory=list)
    # status.resourceClaimStatuses: entry name -> claim name (None: no claim needed).
    resource_claim_statuses: dict[str, str | None] = field(default_factory=dict)
    phase: str | None = None
    # --- volumes, host ports, and what decides whether Karpenter provisions for the pod ---
    volumes: list[PodVolume] = field(default_factory=list)
    # Containers' host ports: what Karpenter's host port usage counts.
    host_ports: tuple[ContainerHostPort, ...] = ()
    # Init containers' host ports: kept for display; Karpenter does not count them.
    init_host_ports: tuple[ContainerHostPort, ...] = ()
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates[].name
    nominated_node_name: str | None = None  # status.nominatedNodeName
    has_status: bool = False  # a status object is present (absent: a hand-written pod)
    conditions: tuple[PodCondition, ...] = ()  # status.conditions
    owner_references: tuple[OwnerReference, ...] = ()
    # --- end of volumes, host ports and provisioning ---
    # --- topology (scheduling/topology.py): labels, pod (anti-)affinity, preferred node
    # affinity, spread constraints; the preferred terms are what relaxation removes.
    labels: dict[str, str] = field(default_factory=dict)
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    # --- end topology
    raw: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# --- storage (core/v1 PersistentVolume(Claim), storage.k8s.io/v1) ----------------------------


@record
class PersistentVolumeClaim:
    """A PersistentVolumeClaim: the volume or storage class a pod's volume binds to."""

    namespace: str
    name: str
    storage_class_name: str | None = None  # None: unset; "": dynamic provisioning disabled
    volume_name: str = ""  # spec.volumeName; "" while unbound
    phase: str | None = None  # status.phase (Pending | Bound | Lost)
    annotations: dict[str, str] = field(default_factory=dict)
    deleting: bool = False
    raw: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@record
class PersistentVolume:
    """A PersistentVolume: the node affinity and driver that pin its pods."""

    name: str
    node_affinity: dict | None = None  # spec.nodeAffinity.required, a raw v1.NodeSelector
    csi_driver: str | None = None  # spec.csi.driver
    aws_elastic_block_store: bool = False  # in-tree EBS source (migrated to ebs.csi.aws.com)
    local: bool = False  # spec.local or spec.hostPath: pinned to one host by nature
    storage_class_name: str = ""
    deleting: bool = False
    raw: dict = field(default_factory=dict)


@record(frozen=True)
class TopologySelectorRequirement:
    """One ``allowedTopologies`` expression of a StorageClass."""

    key: str
    values: tuple[str, ...]


@record
class StorageClass:
    """A StorageClass: its provisioner, binding mode and allowed topologies."""

    name: str
    provisioner: str
    # API defaulting: Immediate when unset.
    volume_binding_mode: str = "Immediate"
    # allowedTopologies: terms ORed, each term's expressions ANDed.
    allowed_topologies: list[tuple[TopologySelectorRequirement, ...]] = field(default_factory=list)
    # Annotated storageclass.kubernetes.io/is-default-class: "true" (the class the API server
    # gives a claim created without one).
    default: bool = False
    creation_timestamp: str = ""
    raw: dict = field(default_factory=dict)


@record(frozen=True)
class CSINodeDriver:
    """One driver of a CSINode, with the volumes a node may attach."""

    name: str
    # spec.drivers[].allocatable.count; None when the driver states no allocatable at all.
    # An allocatable without a count reads as 0, as Karpenter reads it.
    allocatable_count: int | None = None


@record
class CSINode:
    """A CSINode: per CSI driver, how many volumes the node may attach."""

    name: str  # the node's name
    drivers: list[CSINodeDriver] = field(default_factory=list)
    raw: dict = field(default_factory=dict)


# --- apps/v1 ---------------------------------------------------------------------------------


@record
class DaemonSet:
    """A DaemonSet: the pod it runs on every node it tolerates (overhead, room kept)."""

    namespace: str
    name: str
    uid: str = ""
    # spec.template as the pod the DaemonSet controller would create (limits merged into
    # requests, as Karpenter's PodForDaemonSet does), named after the DaemonSet.
    template: Pod | None = None
    raw: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# --- Karpenter -------------------------------------------------------------------------------


@record
class NodePool:
    """A Karpenter NodePool: requirements, template, taints, limits and weight."""

    name: str
    weight: int = 0
    # spec.template.spec.requirements, raw NodeSelectorRequirementWithMinValues dicts.
    requirements: list[dict] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # spec.template.metadata.labels
    taints: list[Taint] = field(default_factory=list)
    startup_taints: list[Taint] = field(default_factory=list)
    limits: dict[str, Quantity] = field(default_factory=dict)
    raw: dict = field(default_factory=dict)


@record
class NodeClaim:
    """A Karpenter NodeClaim already in the cluster (launched, or its node not registered yet)."""

    name: str
    node_pool: str | None = None  # label karpenter.sh/nodepool
    node_name: str | None = None  # status.nodeName
    instance_type: str | None = None  # label node.kubernetes.io/instance-type
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    requirements: list[dict] = field(default_factory=list)  # spec.requirements, raw
    taints: list[Taint] = field(default_factory=list)
    initialized: bool = False  # status condition Initialized == True
    deleting: bool = False
    raw: dict = field(default_factory=dict)


@record
class Offering:
    """An instance type's offering: zone, capacity type, price and availability."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    # Extra requirements of the offering (KWOK shape), raw NodeSelectorRequirements.
    requirements: list[dict] = field(default_factory=list)


@record
class ResourceSliceTemplate:
    """What a node's DRA driver will publish (node-local); devices have the slice shape."""

    driver: str
    pool: str
    devices: list[Device] = field(default_factory=list)
    shared_counters: list[CounterSet] = field(default_factory=list)
    # The template entry as written (slice-level fields such as skipNodeOperations).
    raw: dict = field(default_factory=dict)


@record
class AttributeBindingDecl:
    """Devices of an instance type that will report the same value of ``attribute``."""

    attribute: str
    devices: list[DeviceID] = field(default_factory=list)


@record
class InstanceType:
    """An instance type a NodePool may launch: capacity, requirements, offerings and devices."""

    name: str
    capacity: dict[str, Quantity] = field(default_factory=dict)
    requirements: list[dict] = field(default_factory=list)  # raw NodeSelectorRequirements
    offerings: list[Offering] = field(default_factory=list)
    resource_slice_templates: list[ResourceSliceTemplate] = field(default_factory=list)
    attribute_bindings: list[AttributeBindingDecl] = field(default_factory=list)
    raw: dict = field(default_factory=dict)


# --- the snapshot ----------------------------------------------------------------------------


@record
class Snapshot:
    """Everything one upload holds, typed, plus the raw documents it came from."""

    resource_slices: list[ResourceSlice] = field(default_factory=list)
    device_classes: dict[str, DeviceClass] = field(default_factory=dict)
    resource_claims: dict[str, ResourceClaim] = field(default_factory=dict)  # "ns/name"
    resource_claim_templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    device_taint_rules: list[DeviceTaintRule] = field(default_factory=list)
    namespaces: dict[str, Namespace] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    node_pools: dict[str, NodePool] = field(default_factory=dict)
    node_claims: dict[str, NodeClaim] = field(default_factory=dict)
    instance_types: dict[str, InstanceType] = field(default_factory=dict)
    persistent_volume_claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    persistent_volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)
    daemon_sets: dict[str, DaemonSet] = field(default_factory=dict)  # "ns/name"
    # Every recognised document as uploaded, in load order: (kind, raw dict).
    documents: list[tuple[str, dict]] = field(default_factory=list)
    # What the load skipped or read differently (unknown kinds, legacy keys, kinds that change
    # scheduling but are not read): about the files, so kept with a stored snapshot.
    warnings: list[str] = field(default_factory=list)
    # Fields of the documents that change scheduling but the simulation does not honour
    # (allocator/snapshot/unsimulated.py), worked out again at every load.
    unsimulated: list[str] = field(default_factory=list)

    def object_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for kind, _ in self.documents:
            counts[kind] = counts.get(kind, 0) + 1
        return counts


JSON = dict[str, Any]
